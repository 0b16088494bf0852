//! What a resume replays: the recorded scheduler events, less the dispatches that never
//! settled (killed with greenlight: dispatched again) and the units whose writes are gone (run
//! again).
//!
//! The rule: the scheduler is fed only what happened and still holds; nothing here guesses an
//! outcome. A dispatch in flight at a kill has no result, so it is not a finished dispatch.

use crate::run::journal::Entry;
use crate::schedule::Event;

/// The unit an event is about, when it is a dispatch's.
fn unit_of(event: &Event) -> Option<(&str, Option<&str>)> {
    match event {
        Event::Dispatched { step, item, .. } | Event::Settled { step, item, .. } => {
            Some((step.as_str(), item.as_deref()))
        }
        _ => None,
    }
}

/// The events to fold into a fresh scheduler, from everything recorded, in order.
pub fn events(entries: &[Entry]) -> Vec<Event> {
    let mut out: Vec<Event> = Vec::new();
    for entry in entries {
        match entry {
            Entry::Event { event, .. } => out.push(event.clone()),
            Entry::Abandoned { step, item } => {
                // Its last dispatch, which has no settle after it.
                if let Some(at) = out.iter().rposition(|e| {
                    matches!(e, Event::Dispatched { .. })
                        && unit_of(e) == Some((step.as_str(), item.as_deref()))
                }) {
                    out.remove(at);
                }
            }
            Entry::Rerun { step, item, .. } => {
                out.retain(|e| unit_of(e) != Some((step.as_str(), item.as_deref())));
            }
            _ => {}
        }
    }
    // A gate or a landing started and never decided is started again.
    let mut kept = Vec::with_capacity(out.len());
    for (i, event) in out.iter().enumerate() {
        let decided_later = |pred: &dyn Fn(&Event) -> bool| out[i + 1..].iter().any(pred);
        let keep = match event {
            Event::GateStarted { step } => {
                decided_later(&|e| matches!(e, Event::Judged { step: s, .. } if s == step))
            }
            Event::LandStarted { step, item } => decided_later(
                &|e| matches!(e, Event::Landed { step: s, item: i, .. } if s == step && i == item),
            ),
            _ => true,
        };
        if keep {
            kept.push(event.clone());
        }
    }
    kept
}

/// The units dispatched and never settled in `events`, in order.
pub fn unsettled(events: &[Event]) -> Vec<(String, Option<String>)> {
    let mut open: Vec<(String, Option<String>)> = Vec::new();
    for event in events {
        match event {
            Event::Dispatched { step, item, .. } => open.push((step.clone(), item.clone())),
            Event::Settled { step, item, .. } => {
                open.retain(|(s, i)| !(s == step && i == item));
            }
            _ => {}
        }
    }
    open
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::Outcome;

    fn d(step: &str, item: Option<&str>, attempt: u64) -> Entry {
        Entry::Event {
            event: Event::Dispatched {
                step: step.into(),
                item: item.map(Into::into),
                attempt,
            },
            via: None,
        }
    }

    fn s(step: &str, item: Option<&str>) -> Entry {
        Entry::Event {
            event: Event::Settled {
                step: step.into(),
                item: item.map(Into::into),
                outcome: Outcome::Ok,
            },
            via: None,
        }
    }

    #[test]
    fn an_abandoned_dispatch_is_dropped_and_a_settled_one_kept() {
        let entries = vec![
            d("fix", Some("a"), 1),
            d("fix", Some("b"), 1),
            s("fix", Some("a")),
            Entry::Abandoned {
                step: "fix".into(),
                item: Some("b".into()),
            },
        ];
        let raw: Vec<Event> = entries[..3]
            .iter()
            .filter_map(|e| match e {
                Entry::Event { event, .. } => Some(event.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(unsettled(&raw), vec![("fix".into(), Some("b".into()))]);
        let replayed = events(&entries);
        assert_eq!(replayed.len(), 2);
        assert!(unsettled(&replayed).is_empty());
    }

    #[test]
    fn a_rerun_drops_every_record_of_its_unit_and_an_undecided_gate_starts_again() {
        let entries = vec![
            d("survey", None, 1),
            s("survey", None),
            Entry::Event {
                event: Event::GateStarted {
                    step: "review".into(),
                },
                via: None,
            },
            Entry::Rerun {
                step: "survey".into(),
                item: None,
                missing: "SURVEY.md".into(),
            },
        ];
        assert!(events(&entries).is_empty());
    }
}
