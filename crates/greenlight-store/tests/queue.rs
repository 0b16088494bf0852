//! The goal queue on either backend (see `common`): labels decide who may claim, a lease that
//! runs out lets another worker take the item under a new epoch, and the old holder can then
//! neither write, renew nor end it; many workers claiming at once take each item once.

mod common;

use std::sync::Arc;

use greenlight_store::{
    Error, HandClock, NewQueueItem, NewWorkflowRun, QueueKind, QueueState, Reads, Store,
    WorkflowBudget,
};

fn item(labels: &[&str]) -> NewQueueItem {
    NewQueueItem {
        kind: QueueKind::Goal,
        repository: "/srv/repo.git".into(),
        base: "0123abcd".into(),
        spec_json: r#"{"text":"make it pass"}"#.into(),
        labels: labels.iter().map(|l| l.to_string()).collect(),
    }
}

fn workflow_run() -> NewWorkflowRun {
    NewWorkflowRun {
        id: None,
        name: "fan".into(),
        plan_path: "plan.yaml".into(),
        repository: "/r/.git".into(),
        worktree: "/r".into(),
        base_commit: "0123abcd".into(),
        plan_digest: "sha256:plan".into(),
        args_hash: "sha256:args".into(),
        plan_json: "{}".into(),
        args_json: "{}".into(),
        budget: WorkflowBudget {
            units: Some(3),
            token_cap: None,
            cost_cap_usd: None,
            wall_clock_ms: None,
        },
    }
}

fn labels(l: &[&str]) -> Vec<String> {
    l.iter().map(|s| s.to_string()).collect()
}

#[test]
fn labels_decide_who_claims_and_an_expired_lease_moves_the_item_under_a_new_epoch() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = common::state_at(dir.path().join("s.db"));
    let clock = Arc::new(HandClock::new(1_000));
    let mut a = Store::open_with_clock(&db, clock.clone()).expect("open a");
    let mut b = Store::open_with_clock(&db, clock.clone()).expect("open b");
    let gpu = a
        .write(|tx| tx.submit_queue_item(&item(&["gpu"])))
        .expect("submit");
    let plain = a
        .write(|tx| tx.submit_queue_item(&item(&[])))
        .expect("submit");

    // A worker without the label takes only the plain item, then finds nothing.
    let (first, fence_b) = b
        .claim_queue_item("b", &labels(&["linux"]), 30_000)
        .expect("claim")
        .expect("an item");
    assert_eq!(first.id, plain);
    assert_eq!((first.state, first.lease_epoch), (QueueState::Claimed, 1));
    assert!(
        b.claim_queue_item("b", &labels(&["linux"]), 30_000)
            .expect("claim")
            .is_none()
    );
    // One with it takes the labelled one.
    let (second, _) = a
        .claim_queue_item("a", &labels(&["gpu", "linux"]), 30_000)
        .expect("claim")
        .expect("an item");
    assert_eq!((second.id, second.labels.clone()), (gpu, labels(&["gpu"])));

    // b's lease runs out without a renewal; a takes the plain item under epoch 2.
    clock.set(40_000);
    let (again, fence_a) = a
        .claim_queue_item("a", &[], 30_000)
        .expect("claim")
        .expect("the expired item");
    assert_eq!((again.id, again.lease_epoch), (plain, 2));

    // b, fenced on its old epoch, can write nothing more, nor renew, nor end the item.
    b.set_fence(Some(fence_b));
    let refused = b.write(|tx| tx.append_event(None, None, "note", &serde_json::json!({})));
    assert!(
        matches!(refused, Err(Error::LeaseLost { .. })),
        "{refused:?}"
    );
    assert!(!b.renew_queue_lease(fence_b, "b", 30_000).expect("renew"));
    let ended = b.write(|tx| tx.end_queue_item(fence_b, "done"));
    assert!(matches!(ended, Err(Error::LeaseLost { .. })), "{ended:?}");

    // a holds it: renews, writes fenced, ends it; the claims are on record.
    assert!(a.renew_queue_lease(fence_a, "a", 30_000).expect("renew"));
    a.set_fence(Some(fence_a));
    a.write(|tx| tx.end_queue_item(fence_a, "done"))
        .expect("end");
    a.set_fence(None);
    let stored = a.queue_item(plain).expect("read").expect("item");
    assert_eq!(
        (stored.state, stored.outcome.as_deref()),
        (QueueState::Ended, Some("done"))
    );
    let claims: Vec<_> = a
        .queue_claims(plain)
        .expect("claims")
        .into_iter()
        .map(|c| (c.epoch, c.worker))
        .collect();
    assert_eq!(claims, [(1, "b".to_owned()), (2, "a".to_owned())]);
    // An ended item is never claimed again, however old its lease.
    clock.set(1_000_000);
    let left = a
        .claim_queue_item("a", &labels(&["gpu"]), 30_000)
        .expect("claim");
    assert_eq!(
        left.map(|(i, _)| i.id),
        Some(gpu),
        "only the expired gpu item is left"
    );
}

#[test]
fn a_workflow_item_is_claimed_as_one_and_names_the_run_its_first_worker_started() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = common::state_at(dir.path().join("s.db"));
    let mut store = Store::open(&db).expect("open");
    let goal = store
        .write(|tx| tx.submit_queue_item(&item(&[])))
        .expect("submit a goal");
    let mut workflow = item(&[]);
    workflow.kind = QueueKind::Workflow;
    let flow = store
        .write(|tx| tx.submit_queue_item(&workflow))
        .expect("submit a workflow run");
    let (first, _) = store
        .claim_queue_item("w", &[], 30_000)
        .expect("claim")
        .expect("item");
    assert_eq!((first.id, first.kind), (goal, QueueKind::Goal));
    let (second, fence) = store
        .claim_queue_item("w", &[], 30_000)
        .expect("claim")
        .expect("item");
    assert_eq!((second.id, second.kind), (flow, QueueKind::Workflow));
    assert_eq!(second.workflow_run, None);
    // The run and the item's link to it are one transaction.
    let run = store
        .write(|tx| {
            let run = tx.create_workflow_run(&workflow_run())?;
            tx.attach_queue_workflow(fence.item, run)?;
            Ok::<_, Error>(run)
        })
        .expect("start the run");
    let read = store.queue_item(flow).expect("read").expect("the item");
    assert_eq!(
        (read.kind, read.workflow_run, read.goal),
        (QueueKind::Workflow, Some(run), None)
    );
}

#[test]
fn the_holder_of_a_workflow_items_claim_resumes_its_run_though_its_owner_elsewhere_looks_alive() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = common::state_at(dir.path().join("s.db"));
    let clock = Arc::new(HandClock::new(1_000));
    let mut dead = Store::open_with_clock(&db, clock.clone()).expect("open");
    let mut heir = Store::open_with_clock(&db, clock.clone()).expect("open");
    let mut workflow = item(&[]);
    workflow.kind = QueueKind::Workflow;
    let flow = dead
        .write(|tx| tx.submit_queue_item(&workflow))
        .expect("submit");
    let other = dead
        .write(|tx| tx.submit_queue_item(&workflow))
        .expect("submit another");
    let (_, first) = dead
        .claim_queue_item("dead", &[], 10_000)
        .expect("claim")
        .expect("item");
    assert_eq!(first.item, flow);
    dead.set_fence(Some(first));
    let run = dead
        .write(|tx| {
            let run = tx.create_workflow_run(&workflow_run())?;
            tx.attach_queue_workflow(first.item, run)?;
            Ok::<_, Error>(run)
        })
        .expect("start the run");
    // Its driver was on another machine: /proc here cannot tell that it died.
    common::Raw::open(&db)
        .execute(
            "UPDATE workflow_runs SET owner_host = 'elsewhere 0' WHERE id = ?1",
            &[run.0.into()],
        )
        .expect("owner");
    let unfenced = heir.write(|tx| tx.resume_workflow_run(run));
    assert!(
        matches!(unfenced, Err(Error::WorkflowRunOwned { .. })),
        "no claim, no resume: {unfenced:?}"
    );
    // The lease runs out; the heir claims the item under the next epoch and resumes.
    clock.set(20_000);
    let (_, second) = heir
        .claim_queue_item("heir", &[], 10_000)
        .expect("claim")
        .expect("the expired item");
    assert_eq!((second.item, second.epoch), (flow, 2));
    let (_, elsewhere) = heir
        .claim_queue_item("heir", &[], 10_000)
        .expect("claim")
        .expect("the other item");
    assert_eq!(elsewhere.item, other);
    // A claim on another item is no claim on this run.
    heir.set_fence(Some(elsewhere));
    let wrong = heir.write(|tx| tx.resume_workflow_run(run));
    assert!(
        matches!(wrong, Err(Error::WorkflowRunOwned { .. })),
        "{wrong:?}"
    );
    heir.set_fence(Some(second));
    heir.write(|tx| tx.resume_workflow_run(run))
        .expect("the claim's holder resumes");
    let resumed = heir.workflow_run(run).expect("read").expect("run");
    assert_eq!(
        resumed.owner.map(|o| o.pid),
        Some(i64::from(std::process::id()))
    );
    // The dead driver's claim is spent: it cannot write a row of the run again.
    let late = dead.write(|tx| tx.resume_workflow_run(run));
    assert!(matches!(late, Err(Error::LeaseLost { .. })), "{late:?}");
}

#[test]
fn a_released_item_goes_back_to_the_queue_and_a_bad_label_or_request_is_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = common::state_at(dir.path().join("s.db"));
    let mut store = Store::open(&db).expect("open");
    let id = store
        .write(|tx| tx.submit_queue_item(&item(&[])))
        .expect("submit");
    let (_, fence) = store
        .claim_queue_item("w", &[], 30_000)
        .expect("claim")
        .expect("item");
    store
        .write(|tx| tx.release_queue_item(fence))
        .expect("release");
    let (back, fence2) = store
        .claim_queue_item("v", &[], 30_000)
        .expect("claim")
        .expect("item");
    assert_eq!((back.id, fence2.epoch), (id, 2));

    let bad = store.write(|tx| tx.submit_queue_item(&item(&["has space"])));
    assert!(matches!(bad, Err(Error::BadLabel { .. })), "{bad:?}");
    let mut not_json = item(&[]);
    not_json.spec_json = "{oops".into();
    let bad = store.write(|tx| tx.submit_queue_item(&not_json));
    assert!(matches!(bad, Err(Error::NotJson { .. })), "{bad:?}");
    assert_eq!(
        store.queue_items().expect("items").len(),
        1,
        "nothing refused was queued"
    );
}

#[test]
fn many_workers_claiming_at_once_take_each_item_exactly_once() {
    const ITEMS: usize = 120;
    const WORKERS: usize = 6;
    let dir = tempfile::tempdir().expect("tmp");
    let db = common::state_at(dir.path().join("s.db"));
    let mut store = Store::open(&db).expect("open");
    store
        .write(|tx| {
            for _ in 0..ITEMS {
                tx.submit_queue_item(&item(&[]))?;
            }
            Ok::<_, Error>(())
        })
        .expect("submit");
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut store = Store::open(&db).expect("open");
                let name = format!("w{w}");
                let mut mine = Vec::new();
                while let Some((item, _)) =
                    store.claim_queue_item(&name, &[], 600_000).expect("claim")
                {
                    mine.push(item.id);
                }
                mine
            })
        })
        .collect();
    let mut all: Vec<_> = workers
        .into_iter()
        .flat_map(|w| w.join().expect("worker"))
        .collect();
    assert_eq!(all.len(), ITEMS, "every item claimed, none twice");
    all.sort();
    all.dedup();
    assert_eq!(all.len(), ITEMS, "no item claimed by two workers");
    for id in all {
        assert_eq!(
            store.queue_claims(id).expect("claims").len(),
            1,
            "item {id}"
        );
    }
}
