//! Progress notifications of one tool call, sent in order and only when the client asked for
//! them (a progress token on the request): the `progress` value rises by one with every
//! notification, as the protocol requires it to strictly increase.

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RoleServer};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// A call's progress channel; cloning shares it. A no-op without a token.
#[derive(Clone)]
pub struct Progress {
    queue: Option<mpsc::UnboundedSender<String>>,
}

/// The task that sends the notifications; [`Sender::flush`] waits until all are sent.
pub struct Sender {
    task: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts sending to `peer` under `token`, or nothing when `token` is `None`.
    pub fn start(peer: Peer<RoleServer>, token: Option<ProgressToken>) -> (Progress, Sender) {
        let Some(token) = token else {
            return (Progress { queue: None }, Sender { task: None });
        };
        let (queue, mut inbox) = mpsc::unbounded_channel::<String>();
        let task = tokio::spawn(async move {
            let mut sent = 0u32;
            while let Some(message) = inbox.recv().await {
                sent += 1;
                let param = ProgressNotificationParam::new(token.clone(), f64::from(sent))
                    .with_message(message);
                // A client that went away cannot be told; the call ends on its own.
                let _ = peer.notify_progress(param).await;
            }
        });
        (Progress { queue: Some(queue) }, Sender { task: Some(task) })
    }

    /// Queues one notification.
    pub fn send(&self, message: String) {
        if let Some(queue) = &self.queue {
            let _ = queue.send(message);
        }
    }
}

impl Sender {
    /// Waits until every queued notification is sent (call after the last clone of its
    /// [`Progress`] is dropped): the result must come after them.
    pub async fn flush(mut self) {
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}
