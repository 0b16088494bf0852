//! The goal list as a watcher pages it, and what changed since a watcher last looked.
//!
//! The rule: a list read costs its page, never the file's whole history. The default list is
//! the goals still in play — active or paused, or changed within [`ARCHIVE_AFTER_MS`] — newest
//! first; older finished (done or cleared) goals are archived: they leave the default list but
//! are never deleted, and stay reachable by id and in the list with archived goals included.
//! Each part is one range of an index, stopping at the page's size.

use crate::db::params;

use crate::Error;
use crate::model::{Goal, GoalId, Millis};
use crate::read::collect;
use crate::read::sealed::Access;
use crate::{Reads, RunId};

/// A done or cleared goal unchanged for this long leaves the default goal list (seven days: a
/// week of finished work stays in view; ≈5k goals a week made the whole list 28.8 MB a tab).
pub const ARCHIVE_AFTER_MS: Millis = 7 * 24 * 60 * 60 * 1000;

/// One page of the goal list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoalPage {
    /// Only goals older (smaller id) than this one: the cursor a previous page ended at.
    pub before: Option<GoalId>,
    /// At most this many goals.
    pub limit: usize,
    /// Archived goals included.
    pub archived: bool,
    /// Now, which the archive rule is judged against.
    pub now: Millis,
}

/// What changed since a watcher's positions in the event log and the frames.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Changes {
    /// Goals with an event or a frame since (ascending).
    pub goals: Vec<GoalId>,
    /// Runs with a frame since (ascending).
    pub runs: Vec<RunId>,
    /// The event log's last seq now.
    pub event_seq: i64,
    /// The frames' last file-wide position now.
    pub frame_position: i64,
}

fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The page's goals, newest first.
pub(crate) fn goal_page<A: Access + Reads + ?Sized>(
    a: &A,
    page: &GoalPage,
) -> Result<Vec<Goal>, Error> {
    let before = page.before.map_or(i64::MAX, |g| g.0);
    let n = limit(page.limit);
    let mut ids: Vec<i64> = if page.archived {
        collect(
            a,
            "SELECT id FROM goals WHERE id < ?1 ORDER BY id DESC LIMIT ?2",
            params![before, n],
            |r| r.get(0),
        )?
    } else {
        // Live goals (a partial index of a few rows) and goals changed since the cutoff (a
        // range of `goals_by_updated`), merged: an OR would walk every archived goal.
        let mut ids: Vec<i64> = collect(
            a,
            "SELECT id FROM goals WHERE state IN ('active', 'paused') AND id < ?1 \
             ORDER BY id DESC LIMIT ?2",
            params![before, n],
            |r| r.get(0),
        )?;
        ids.extend(collect(
            a,
            "SELECT id FROM goals WHERE updated_at >= ?3 AND id < ?1 ORDER BY id DESC LIMIT ?2",
            params![before, n, page.now - ARCHIVE_AFTER_MS],
            |r| r.get::<i64>(0),
        )?);
        ids
    };
    ids.sort_unstable_by(|x, y| y.cmp(x));
    ids.dedup();
    ids.truncate(page.limit);
    let mut goals = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(goal) = a.goal(GoalId(id))? {
            goals.push(goal);
        }
    }
    Ok(goals)
}

/// The goals and runs touched after `event_seq` (events) and `frame_position` (frames).
pub(crate) fn changes_since<A: Access + Reads + ?Sized>(
    a: &A,
    event_seq: i64,
    frame_position: i64,
) -> Result<Changes, Error> {
    let mut goals: Vec<i64> = collect(
        a,
        "SELECT DISTINCT goal_id FROM events WHERE seq > ?1 AND goal_id IS NOT NULL",
        [event_seq],
        |r| r.get(0),
    )?;
    let streams: Vec<String> = collect(
        a,
        "SELECT DISTINCT stream FROM frames WHERE id > ?1",
        [frame_position],
        |r| r.get(0),
    )?;
    let mut runs = Vec::new();
    for stream in streams {
        match stream.parse::<greenlight_stream::StreamId>() {
            Ok(greenlight_stream::StreamId::Goal(id)) => goals.push(id),
            Ok(greenlight_stream::StreamId::Run(id)) => runs.push(id),
            Ok(greenlight_stream::StreamId::Workflow(_)) | Err(_) => {}
        }
    }
    goals.sort_unstable();
    goals.dedup();
    runs.sort_unstable();
    runs.dedup();
    Ok(Changes {
        goals: goals.into_iter().map(GoalId).collect(),
        runs: runs.into_iter().map(RunId).collect(),
        event_seq: a.last_seq()?,
        frame_position: a.last_frame_position()?,
    })
}
