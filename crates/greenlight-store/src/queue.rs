//! The queue of work any worker may take: `goal submit` and `workflow submit` put an item on it
//! (a goal or a workflow run: a repository, a base commit, the request as JSON, the labels a
//! worker must have), `goal worker` claims the oldest item it can run and holds it under a
//! lease it renews.
//!
//! The rules that keep one item with one worker:
//! - A claim is one statement that picks the oldest claimable item (queued, or claimed under a
//!   lease that has run out) and takes it, with a new **epoch**; on PostgreSQL the pick is
//!   `FOR UPDATE SKIP LOCKED`, so workers claiming at once never wait on each other and never
//!   take the same item, and claims skip the store's write lock. On SQLite the claim runs in a
//!   write transaction, which is exclusive by itself.
//! - Renewing, ending or giving back an item names its epoch: once another worker has claimed
//!   it, the old holder's epoch is stale and every one of those is refused.
//! - A store given a [`Fence`] checks the epoch at the start of every write transaction (and,
//!   on PostgreSQL, holds the item's row against a claim until it commits), so a worker that
//!   lost its lease cannot write one more row of the goal: it learns with
//!   [`Error::LeaseLost`](crate::Error::LeaseLost).
//!
//! - Leases run by one clock: on PostgreSQL the database server's (`lease_now`), since the
//!   workers' machines may disagree by more than a lease and one running ahead would take items
//!   from their live holders; on SQLite, the one machine's.
//!
//! Every claim is kept (`queue_claims`), so who held an item when can be audited.

use serde::Serialize;

use crate::db::{Backend, Conn, OptionalExtension, Row, params};
use crate::model::{GoalId, Millis};
use crate::read::{collect, sealed::Access, sql_err};
use crate::workflow::WorkflowRunId;
use crate::{Error, Tx};

/// A queue item's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct QueueItemId(pub i64);

impl std::fmt::Display for QueueItemId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What a queue item asks a worker to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueKind {
    /// A goal (`goal submit`).
    Goal,
    /// A workflow run (`workflow submit`).
    Workflow,
}

impl QueueKind {
    fn as_str(self) -> &'static str {
        match self {
            QueueKind::Goal => "goal",
            QueueKind::Workflow => "workflow",
        }
    }
}

/// What `goal submit` or `workflow submit` queues.
#[derive(Debug, Clone)]
pub struct NewQueueItem {
    /// A goal or a workflow run.
    pub kind: QueueKind,
    /// Where a worker gets the code: a path or URL `git clone` takes.
    pub repository: String,
    /// The commit (or ref) the worker's worktree starts from.
    pub base: String,
    /// The request (a goal's, or a workflow plan with its arguments), as JSON text (the store
    /// keeps it as given).
    pub spec_json: String,
    /// Labels a worker must have, all of them, to claim the item.
    pub labels: Vec<String>,
}

/// Where an item is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueState {
    /// Waiting for a worker.
    Queued,
    /// Held by a worker under a lease.
    Claimed,
    /// Finished (done, or stopped for a reason a person must look at).
    Ended,
}

/// A queue item as stored.
#[derive(Debug, Clone, Serialize)]
pub struct QueueItem {
    /// Its id.
    pub id: QueueItemId,
    /// A goal or a workflow run.
    pub kind: QueueKind,
    /// Where a worker gets the code.
    pub repository: String,
    /// The commit its worktree starts from.
    pub base: String,
    /// The goal's request, as submitted.
    pub spec_json: String,
    /// The labels a worker must have, sorted.
    pub labels: Vec<String>,
    /// Queued, claimed or ended.
    pub state: QueueState,
    /// The goal the first worker made for it (a goal item).
    pub goal: Option<GoalId>,
    /// The workflow run the first worker started for it (a workflow item).
    pub workflow_run: Option<WorkflowRunId>,
    /// The worker holding it.
    pub lease_owner: Option<String>,
    /// How many times it was claimed (the current holder's epoch).
    pub lease_epoch: u64,
    /// When the holder's lease runs out unless renewed.
    pub lease_until: Option<Millis>,
    /// How it ended: `done`, or `paused:<reason>`.
    pub outcome: Option<String>,
    /// When it was submitted.
    pub submitted_at: Millis,
    /// When it ended.
    pub ended_at: Option<Millis>,
}

/// One claim of an item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueClaim {
    /// The claim's number, from 1.
    pub epoch: u64,
    /// Who claimed it.
    pub worker: String,
    /// When.
    pub claimed_at: Millis,
}

/// What a store given to a worker's goal checks before each write: the item is still claimed
/// under this epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fence {
    /// The item.
    pub item: QueueItemId,
    /// The claim that holds it.
    pub epoch: u64,
}

const ITEM_COLUMNS: &str = "id, repository, base, spec, state, goal_id, lease_owner, \
     lease_epoch, lease_until, outcome, submitted_at, ended_at, kind, workflow_run";

/// An item as read, with its state and kind still as text.
pub(crate) type RawItem = (QueueItem, String, String);

fn raw_item(r: &Row) -> crate::db::DbResult<RawItem> {
    Ok((
        QueueItem {
            id: QueueItemId(r.get(0)?),
            kind: QueueKind::Goal,
            repository: r.get(1)?,
            base: r.get(2)?,
            spec_json: r.get(3)?,
            labels: Vec::new(),
            state: QueueState::Queued,
            goal: r.get::<Option<i64>>(5)?.map(GoalId),
            workflow_run: r.get::<Option<i64>>(13)?.map(WorkflowRunId),
            lease_owner: r.get(6)?,
            lease_epoch: r.get(7)?,
            lease_until: r.get(8)?,
            outcome: r.get(9)?,
            submitted_at: r.get(10)?,
            ended_at: r.get(11)?,
        },
        r.get(4)?,
        r.get(12)?,
    ))
}

fn decode<A: Access + ?Sized>(a: &A, (mut item, state, kind): RawItem) -> Result<QueueItem, Error> {
    item.kind = match kind.as_str() {
        "goal" => QueueKind::Goal,
        "workflow" => QueueKind::Workflow,
        _ => {
            return Err(Error::Corrupt {
                path: a.db_path().to_path_buf(),
                what: "queue_items.kind",
                found: kind,
            });
        }
    };
    item.state = match state.as_str() {
        "queued" => QueueState::Queued,
        "claimed" => QueueState::Claimed,
        "ended" => QueueState::Ended,
        _ => {
            return Err(Error::Corrupt {
                path: a.db_path().to_path_buf(),
                what: "queue_items.state",
                found: state,
            });
        }
    };
    item.labels = collect(
        a,
        "SELECT label FROM queue_labels WHERE item_id = ?1 ORDER BY label",
        [item.id.0],
        |r| r.get(0),
    )?;
    Ok(item)
}

/// The item with this id.
pub(crate) fn queue_item<A: Access + ?Sized>(
    a: &A,
    id: QueueItemId,
) -> Result<Option<QueueItem>, Error> {
    let sql = format!("SELECT {ITEM_COLUMNS} FROM queue_items WHERE id = ?1");
    let raw = a
        .conn()
        .query_row(&sql, [id.0], raw_item)
        .optional()
        .map_err(|e| sql_err(a, e))?;
    raw.map(|r| decode(a, r)).transpose()
}

/// Every item, oldest first.
pub(crate) fn queue_items<A: Access + ?Sized>(a: &A) -> Result<Vec<QueueItem>, Error> {
    let sql = format!("SELECT {ITEM_COLUMNS} FROM queue_items ORDER BY id");
    let raws = collect(a, &sql, (), raw_item)?;
    raws.into_iter().map(|r| decode(a, r)).collect()
}

/// How many items are not ended (queued or claimed).
pub(crate) fn open_count<A: Access + ?Sized>(a: &A) -> Result<u64, Error> {
    a.conn()
        .query_row(
            "SELECT COUNT(*) FROM queue_items WHERE state <> 'ended'",
            (),
            |r| r.get(0),
        )
        .map_err(|e| sql_err(a, e))
}

/// Every claim of `item`, in order.
pub(crate) fn queue_claims<A: Access + ?Sized>(
    a: &A,
    item: QueueItemId,
) -> Result<Vec<QueueClaim>, Error> {
    collect(
        a,
        "SELECT epoch, worker, claimed_at FROM queue_claims WHERE item_id = ?1 ORDER BY epoch",
        [item.0],
        |r| {
            Ok(QueueClaim {
                epoch: r.get(0)?,
                worker: r.get(1)?,
                claimed_at: r.get(2)?,
            })
        },
    )
}

fn label_ok(label: &str) -> Result<(), Error> {
    if !label.is_empty()
        && label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:=".contains(&b))
    {
        Ok(())
    } else {
        Err(Error::BadLabel {
            label: label.to_owned(),
        })
    }
}

impl Tx<'_> {
    /// Puts an item on the queue; idle workers are woken when the transaction commits.
    pub fn submit_queue_item(&self, new: &NewQueueItem) -> Result<QueueItemId, Error> {
        serde_json::from_str::<serde_json::Value>(&new.spec_json).map_err(|source| {
            Error::NotJson {
                what: "the queued item's request",
                source,
            }
        })?;
        for label in &new.labels {
            label_ok(label)?;
        }
        let id = QueueItemId(self.insert_id(
            "INSERT INTO queue_items (kind, repository, base, spec, state, submitted_at) \
             VALUES (?5, ?1, ?2, ?3, 'queued', ?4) RETURNING id",
            params![
                new.repository,
                new.base,
                new.spec_json,
                self.now(),
                new.kind.as_str()
            ],
        )?);
        for label in &new.labels {
            self.exec(
                "INSERT INTO queue_labels (item_id, label) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                params![id.0, label],
            )?;
        }
        self.note(|n| n.queue = true);
        Ok(id)
    }

    /// Records the goal a worker made for `item` (its first claim makes it).
    pub fn attach_queue_goal(&self, item: QueueItemId, goal: GoalId) -> Result<(), Error> {
        self.exec(
            "UPDATE queue_items SET goal_id = ?2 WHERE id = ?1",
            params![item.0, goal.0],
        )?;
        Ok(())
    }

    /// Records the workflow run a worker started for `item` (its first claim starts it), in the
    /// transaction that creates the run, so a worker killed at any moment leaves either both or
    /// neither and the next worker never starts a second run.
    pub fn attach_queue_workflow(
        &self,
        item: QueueItemId,
        run: WorkflowRunId,
    ) -> Result<(), Error> {
        self.exec(
            "UPDATE queue_items SET workflow_run = ?2 WHERE id = ?1",
            params![item.0, run.0],
        )?;
        Ok(())
    }

    /// Whether this transaction holds the claim, under its epoch, of the queue item `run`
    /// belongs to (the write checked the claim at its start and, on PostgreSQL, holds its row).
    pub(crate) fn holds_claim_on(&self, run: WorkflowRunId) -> Result<bool, Error> {
        let Some(fence) = self.fence() else {
            return Ok(false);
        };
        let linked: Option<Option<i64>> = self
            .conn()
            .query_row(
                "SELECT workflow_run FROM queue_items WHERE id = ?1",
                [fence.item.0],
                |r| r.get(0),
            )
            .optional()
            .map_err(|e| Error::sql(self.db_path(), e))?;
        Ok(linked.flatten() == Some(run.0))
    }

    /// Moves `goal` to `worktree`: a worker that took over a queued goal on another machine
    /// runs it in a worktree of its own, prepared from the same repository and base.
    pub fn move_goal_worktree(
        &self,
        goal: GoalId,
        worktree: &std::path::Path,
    ) -> Result<(), Error> {
        use std::os::unix::ffi::OsStrExt;
        let n = self.exec(
            "UPDATE goals SET worktree = ?2, updated_at = ?3 WHERE id = ?1",
            params![goal.0, worktree.as_os_str().as_bytes(), self.now()],
        )?;
        if n == 0 {
            return Err(Error::NoSuchGoal(goal));
        }
        self.append_event(
            Some(goal),
            None,
            "goal-moved",
            &serde_json::json!({"worktree": worktree.to_string_lossy()}),
        )?;
        Ok(())
    }

    /// Ends `item` as `outcome`, if `epoch` still holds it.
    pub fn end_queue_item(&self, fence: Fence, outcome: &str) -> Result<(), Error> {
        let n = self.exec(
            "UPDATE queue_items SET state = 'ended', outcome = ?3, ended_at = ?4, \
             lease_owner = NULL, lease_until = NULL \
             WHERE id = ?1 AND lease_epoch = ?2 AND state = 'claimed'",
            params![fence.item.0, fence.epoch, outcome, self.now()],
        )?;
        if n == 0 {
            return Err(Error::LeaseLost { item: fence.item.0 });
        }
        Ok(())
    }

    /// Gives `item` back to the queue (its worker is stopping), if `epoch` still holds it; the
    /// next worker resumes its goal.
    pub fn release_queue_item(&self, fence: Fence) -> Result<(), Error> {
        let n = self.exec(
            "UPDATE queue_items SET state = 'queued', lease_owner = NULL, lease_until = NULL \
             WHERE id = ?1 AND lease_epoch = ?2 AND state = 'claimed'",
            params![fence.item.0, fence.epoch],
        )?;
        if n == 0 {
            return Err(Error::LeaseLost { item: fence.item.0 });
        }
        self.note(|n| n.queue = true);
        Ok(())
    }
}

/// The claim statement for a worker with `labels` (it may take an item only if it has every
/// label the item asks for), in the dialect of `backend`.
fn claim_sql(backend: Backend, labels: usize) -> String {
    let missing_label = if labels == 0 {
        "SELECT 1 FROM queue_labels l WHERE l.item_id = q.id".to_owned()
    } else {
        let list: Vec<String> = (0..labels).map(|i| format!("?{}", i + 4)).collect();
        format!(
            "SELECT 1 FROM queue_labels l WHERE l.item_id = q.id AND l.label NOT IN ({})",
            list.join(", ")
        )
    };
    let lock = match backend {
        Backend::Postgres => " FOR UPDATE SKIP LOCKED",
        Backend::Sqlite => "",
    };
    format!(
        "UPDATE queue_items SET state = 'claimed', lease_owner = ?1, \
         lease_epoch = lease_epoch + 1, lease_until = CAST(?2 AS BIGINT) + ?3 \
         WHERE id = (SELECT q.id FROM queue_items q \
         WHERE (q.state = 'queued' OR (q.state = 'claimed' AND q.lease_until < ?2)) \
         AND NOT EXISTS ({missing_label}) ORDER BY q.id LIMIT 1{lock}) \
         RETURNING {ITEM_COLUMNS}"
    )
}

/// The time leases are measured by: on PostgreSQL with the machine's own clock, the database
/// server's (one clock for every worker, however far theirs drift apart); else `clock`'s
/// reading `now` (SQLite is one machine's; a test's clock is the test's).
pub(crate) fn lease_now(
    conn: Conn<'_>,
    path: &std::path::Path,
    clock: &dyn crate::WallClock,
    now: Millis,
) -> Result<Millis, Error> {
    if conn.backend() != Backend::Postgres || !clock.is_the_machines() {
        return Ok(now);
    }
    conn.query_row(
        "SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
        (),
        |r| r.get(0),
    )
    .map_err(|e| Error::sql(path, e))
}

/// Claims the oldest item `worker` (with `labels`) may run, for `lease_ms`, at `now`.
pub(crate) fn claim(
    conn: Conn<'_>,
    path: &std::path::Path,
    worker: &str,
    labels: &[String],
    now: Millis,
    lease_ms: u64,
) -> Result<Option<RawItem>, Error> {
    let sql = claim_sql(conn.backend(), labels.len());
    let mut values: Vec<crate::db::Value> = vec![
        crate::db::Param::value(&worker),
        crate::db::Param::value(&now),
        crate::db::Param::value(&lease_ms),
    ];
    values.extend(labels.iter().map(crate::db::Param::value));
    let claimed = conn
        .query_row(&sql, values, raw_item)
        .optional()
        .map_err(|e| Error::sql(path, e))?;
    if let Some((item, _, _)) = &claimed {
        conn.execute(
            "INSERT INTO queue_claims (item_id, epoch, worker, claimed_at) VALUES (?1, ?2, ?3, ?4)",
            params![item.id.0, item.lease_epoch, worker, now],
        )
        .map_err(|e| Error::sql(path, e))?;
    }
    Ok(claimed)
}

/// Extends the lease of `fence`'s item by `lease_ms` from `now`; `false` when another worker
/// holds it by now (or it ended).
pub(crate) fn renew(
    conn: Conn<'_>,
    path: &std::path::Path,
    fence: Fence,
    worker: &str,
    now: Millis,
    lease_ms: u64,
) -> Result<bool, Error> {
    let n = conn
        .execute(
            "UPDATE queue_items SET lease_until = CAST(?4 AS BIGINT) + ?5 \
             WHERE id = ?1 AND lease_epoch = ?2 AND lease_owner = ?3 AND state = 'claimed'",
            params![fence.item.0, fence.epoch, worker, now, lease_ms],
        )
        .map_err(|e| Error::sql(path, e))?;
    Ok(n == 1)
}

/// The check a fenced store makes first in each write transaction.
pub(crate) fn check_fence(
    conn: Conn<'_>,
    path: &std::path::Path,
    fence: Fence,
) -> Result<(), Error> {
    // PostgreSQL: FOR SHARE holds the row until this transaction ends, so a claim (FOR UPDATE
    // SKIP LOCKED) cannot take the item between this check and the commit.
    let sql = match conn.backend() {
        Backend::Postgres => {
            "SELECT lease_epoch FROM queue_items WHERE id = ?1 AND state = 'claimed' FOR SHARE"
        }
        Backend::Sqlite => {
            "SELECT lease_epoch FROM queue_items WHERE id = ?1 AND state = 'claimed'"
        }
    };
    let epoch: Option<u64> = conn
        .query_row(sql, [fence.item.0], |r| r.get(0))
        .optional()
        .map_err(|e| Error::sql(path, e))?;
    if epoch == Some(fence.epoch) {
        Ok(())
    } else {
        Err(Error::LeaseLost { item: fence.item.0 })
    }
}
