//! The server's stdin, read on a thread of its own rather than on the async runtime's blocking
//! pool. A blocking read cannot be cancelled, and a runtime waits for its pool when it shuts
//! down: with `tokio::io::stdin`, a SIGTERM while the client kept stdin open ended the gates
//! but left greenlight waiting for the client's next line before it could exit. A thread the
//! runtime does not own ends with the process.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::mpsc;

/// How much one read of stdin takes at most.
const CHUNK: usize = 64 << 10;

/// Chunks read so far and not yet taken; the thread waits when this many are queued.
const QUEUED: usize = 16;

/// stdin as an [`AsyncRead`], fed by a reading thread. End of input and read errors arrive in
/// order after the bytes read before them.
#[derive(Debug)]
pub struct ThreadStdin {
    chunks: mpsc::Receiver<std::io::Result<Vec<u8>>>,
    chunk: Vec<u8>,
    taken: usize,
}

/// Starts the thread that reads this process's stdin.
pub fn stdin() -> std::io::Result<ThreadStdin> {
    from_reader(std::io::stdin())
}

/// Starts a thread that reads `source` (stdin, or a pipe in tests).
pub fn from_reader<R: std::io::Read + Send + 'static>(
    mut source: R,
) -> std::io::Result<ThreadStdin> {
    let (send, chunks) = mpsc::channel(QUEUED);
    std::thread::Builder::new()
        .name("mcp-stdin".into())
        .spawn(move || {
            loop {
                let mut chunk = vec![0; CHUNK];
                let read = match source.read(&mut chunk) {
                    Ok(0) => return,
                    Ok(n) => {
                        chunk.truncate(n);
                        Ok(chunk)
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => Err(e),
                };
                let failed = read.is_err();
                if send.blocking_send(read).is_err() || failed {
                    return;
                }
            }
        })?;
    Ok(ThreadStdin {
        chunks,
        chunk: Vec::new(),
        taken: 0,
    })
}

impl AsyncRead for ThreadStdin {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if this.taken == this.chunk.len() {
            match ready!(this.chunks.poll_recv(cx)) {
                // The thread ended: the input ended (a read error was sent before it).
                None => return Poll::Ready(Ok(())),
                Some(Err(e)) => return Poll::Ready(Err(e)),
                Some(Ok(chunk)) => {
                    this.chunk = chunk;
                    this.taken = 0;
                }
            }
        }
        let n = buf.remaining().min(this.chunk.len() - this.taken);
        buf.put_slice(&this.chunk[this.taken..this.taken + n]);
        this.taken += n;
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt as _;

    /// Every byte arrives in order across chunk boundaries and small reads, then the end.
    #[test]
    fn bytes_arrive_whole_and_in_order_then_the_end() {
        let data: Vec<u8> = (0..(3 * CHUNK + 17)).map(|i| (i % 251) as u8).collect();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let got = runtime.block_on(async {
            let mut input = from_reader(std::io::Cursor::new(data.clone())).expect("thread");
            let mut got = Vec::new();
            let mut small = [0u8; 1000];
            loop {
                let n = input.read(&mut small).await.expect("read");
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&small[..n]);
            }
            got
        });
        assert_eq!(got.len(), data.len());
        assert!(got == data, "bytes differ");
    }

    /// A read error reaches the reader after the bytes before it.
    #[test]
    fn a_read_error_arrives_after_the_bytes_before_it() {
        struct Failing(bool);
        impl std::io::Read for Failing {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                if std::mem::replace(&mut self.0, true) {
                    return Err(std::io::Error::other("the pipe broke"));
                }
                buf[..3].copy_from_slice(b"abc");
                Ok(3)
            }
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let (bytes, error) = runtime.block_on(async {
            let mut input = from_reader(Failing(false)).expect("thread");
            let mut got = Vec::new();
            let error = input.read_to_end(&mut got).await.expect_err("fails");
            (got, error)
        });
        assert_eq!(bytes, b"abc");
        assert_eq!(error.to_string(), "the pipe broke");
    }
}
