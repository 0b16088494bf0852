//! What a verify.yaml v2 draft adds to each drafted gate: the gates it `needs` and the
//! `inputs` it reads ([`super::inputs`]).
//!
//! The one rule: a wrong `needs` turns a gate's verdict into SKIP, so a gate needs another only
//! when the structure leaves no doubt: a test run needs the build of the same toolchain, run
//! the same way in the same directory (`cargo build --workspace` → `cargo test --workspace`,
//! `go build ./...` → `go test ./...`, a package's `build` script → its `test` script).
//! Only tests need, and only builds are needed, so the graph never has a cycle. Lint, format
//! and type checks need nothing and run in parallel with everything.

use std::path::Path;

use super::DraftGate;
use super::inputs::{Cargo, inputs_of};
use greenlight_proc::shell::{program, segments, words};

/// What v2 adds to one gate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GatePlan {
    /// Ids of the gates that must pass before this one starts.
    pub needs: Vec<String>,
    /// The globs the gate reads and a few words on what they cover; `None`: the whole
    /// workspace (always correct).
    pub inputs: Option<(Vec<String>, String)>,
}

/// The `needs` and `inputs` of each gate of `gates` (same order), for the repository at
/// `root`.
pub fn plan_v2(root: &Path, gates: &[DraftGate]) -> Vec<GatePlan> {
    let cargo = Cargo::load(root);
    let steps: Vec<Option<Step>> = gates.iter().map(|g| Step::parse(&g.command)).collect();
    gates
        .iter()
        .zip(&steps)
        .map(|(gate, step)| {
            let needs = match step {
                Some(test) if test.role == Role::Test => gates
                    .iter()
                    .zip(&steps)
                    .filter(|(_, other)| other.as_ref().is_some_and(|b| b.builds_for(test)))
                    .map(|(g, _)| g.id.clone())
                    .collect(),
                _ => Vec::new(),
            };
            GatePlan {
                needs,
                inputs: inputs_of(root, &gate.command, &cargo),
            }
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Build,
    Test,
}

/// A gate that builds or tests with a known toolchain: where it runs, which toolchain, and
/// the rest of its words (what it selects and how).
#[derive(Debug)]
struct Step {
    dir: Option<String>,
    toolchain: &'static str,
    role: Role,
    scope: Vec<String>,
}

impl Step {
    /// True when `self` is the build that `test` would compile again on its own.
    fn builds_for(&self, test: &Step) -> bool {
        self.role == Role::Build
            && self.dir == test.dir
            && self.toolchain == test.toolchain
            && self.scope == test.scope
    }

    /// The step of a one-command gate (`cd DIR && ` in front allowed); `None` for anything
    /// else: a chain, an assignment in front, a tool not known here.
    fn parse(command: &str) -> Option<Step> {
        let segs = segments(command);
        let (dir, segment) = match segs.as_slice() {
            [only] => (None, only),
            [cd, only] => match words(cd).as_slice() {
                [prog, dir] if prog == "cd" => (Some(dir.clone()), only),
                _ => return None,
            },
            _ => return None,
        };
        // `RUSTFLAGS=… cargo build` builds differently from a bare `cargo test`.
        if segment
            .split_whitespace()
            .next()
            .is_none_or(|w| w.contains('='))
        {
            return None;
        }
        let w = words(segment);
        let (toolchain, role, scope) = match program(w.first()?) {
            "cargo" => {
                let at = w.iter().skip(1).position(|a| !a.starts_with('+'))? + 1;
                let role = match w[at].as_str() {
                    "build" | "b" => Role::Build,
                    "test" | "t" => Role::Test,
                    _ => return None,
                };
                let mut scope = w[1..].to_vec();
                scope.remove(at - 1);
                ("cargo", role, scope)
            }
            "go" => {
                let role = match w.get(1)?.as_str() {
                    "build" => Role::Build,
                    "test" => Role::Test,
                    _ => return None,
                };
                ("go", role, w[2..].to_vec())
            }
            pm @ ("npm" | "pnpm" | "yarn" | "bun") => {
                let (script, rest) = match w.get(1)?.as_str() {
                    "run" | "run-script" => (w.get(2)?.as_str(), &w[3..]),
                    "t" => ("test", &w[2..]),
                    name if pm != "npm" || name == "test" => (name, &w[2..]),
                    _ => return None,
                };
                let role = if script == "build" && rest.is_empty() {
                    Role::Build
                } else if script == "test" || script.starts_with("test:") {
                    Role::Test
                } else {
                    return None;
                };
                ("node", role, Vec::new())
            }
            _ => return None,
        };
        Some(Step {
            dir,
            toolchain,
            role,
            scope,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(id: &str, command: &str) -> DraftGate {
        DraftGate {
            id: id.to_owned(),
            command: command.to_owned(),
            timeout_sec: None,
            source: "test".to_owned(),
            setup: None,
        }
    }

    fn needs(gates: &[DraftGate]) -> Vec<Vec<String>> {
        let dir = std::env::temp_dir();
        plan_v2(&dir, gates).into_iter().map(|p| p.needs).collect()
    }

    #[test]
    fn a_test_needs_the_build_of_its_toolchain_run_the_same_way() {
        let gates = [
            gate("fmt", "cargo fmt --all -- --check"),
            gate("build", "cargo build --workspace"),
            gate("build-release", "cargo build --workspace --release"),
            gate("web-build", "cd web && pnpm build"),
            gate("test", "cargo test --workspace"),
            gate("web-test", "cd web && pnpm test -- --reporter=dot"),
            gate("root-test", "npm test"),
            gate("go-build", "go build ./..."),
            gate("go-test", "go test ./..."),
            gate("go-race", "go test -race ./..."),
        ];
        let got = needs(&gates);
        assert_eq!(
            got,
            vec![
                vec![],
                vec![],
                vec![],
                vec![],
                vec!["build".to_owned()],
                vec!["web-build".to_owned()],
                vec![],
                vec![],
                vec!["go-build".to_owned()],
                vec![],
            ]
        );
    }

    #[test]
    fn chains_assignments_recursive_runs_and_make_targets_need_nothing() {
        let gates = [
            gate("build", "cargo build"),
            gate("t1", "RUSTFLAGS=-Dwarnings cargo test"),
            gate("t2", "cargo clippy && cargo test"),
            gate("pbuild", "pnpm run build"),
            gate("t3", "pnpm -r run test"),
            gate("mbuild", "make build"),
            gate("t4", "make test"),
        ];
        assert!(needs(&gates).iter().all(Vec::is_empty));
    }
}
