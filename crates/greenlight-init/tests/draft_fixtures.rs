//! `draft` against repositories shaped like real ones: every gate, its source, and what was
//! left out and why, in one block per repository.

use std::path::{Path, PathBuf};

use greenlight_init::{self as draft, Draft};

/// The fixtures are drafted as on a machine with every tool they name installed, so the
/// answers do not depend on this machine's PATH (`runnable` has its own tests).
const ALL: draft::Programs = draft::Programs::All;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/repos")
        .join(name)
}

fn render(d: &Draft) -> String {
    let mut out = String::new();
    for g in &d.gates {
        let timeout = g
            .timeout_sec
            .map(|t| format!(" [{t}s]"))
            .unwrap_or_default();
        let setup = g
            .setup
            .as_ref()
            .map(|s| format!(" [setup: {}, because {}]", s.command, s.why))
            .unwrap_or_default();
        out.push_str(&format!(
            "{} = {}{timeout}{setup}  <- {}\n",
            g.id, g.command, g.source
        ));
    }
    out.push_str("--- skipped\n");
    for s in &d.skipped {
        let cmd = s.command.lines().next().unwrap_or("");
        out.push_str(&format!("{} | {} | {}\n", s.source, cmd, s.reason));
    }
    out
}

fn drafted(name: &str) -> String {
    match draft::draft(&fixture(name), &ALL) {
        Ok(d) => render(&d),
        Err(e) => panic!("draft of {name} failed: {e}"),
    }
}

/// The clippy default used to add `-D warnings`, which this repository never asked for: its
/// gate would be red on code its own checks accept.
#[test]
fn rust_workspace_without_ci_gets_the_manifest_defaults_and_no_release() {
    assert_eq!(
        drafted("rust-workspace"),
        "\
clippy = cargo clippy --workspace --all-targets [1800s]  <- Cargo.toml (Rust workspace)
test = cargo test --workspace [1800s]  <- Cargo.toml (Rust workspace)
--- skipped
.github/workflows/release.yml |  | the workflow's name mentions `release`: not a check
"
    );
}

#[test]
fn pnpm_monorepo_runs_root_scripts_through_pnpm_and_workspace_only_scripts_recursively() {
    // Not drafted: dev, test:watch (never end), format (rewrites), release/prerelease,
    // postinstall; nor apps/web's deploy, dev, start.
    assert_eq!(
        drafted("node-pnpm-monorepo"),
        "\
lint = pnpm run lint [setup: pnpm install --frozen-lockfile, because node_modules is absent here]  <- package.json script \"lint\"
format-check = pnpm run format:check [setup: pnpm install --frozen-lockfile, because node_modules is absent here]  <- package.json script \"format:check\"
typecheck = pnpm run typecheck [setup: pnpm install --frozen-lockfile, because node_modules is absent here]  <- package.json script \"typecheck\"
build = pnpm run build [setup: pnpm install --frozen-lockfile, because node_modules is absent here]  <- package.json script \"build\"
test = pnpm run test [setup: pnpm install --frozen-lockfile, because node_modules is absent here]  <- package.json script \"test\"
test-e2e = pnpm -r --if-present run test:e2e [setup: pnpm install --frozen-lockfile, because node_modules is absent here]  <- pnpm workspace: 1 package defines script \"test:e2e\"
--- skipped
"
    );
}

#[test]
fn python_project_uses_its_tox_and_nox_definitions_over_tool_defaults() {
    // py310/py311/py312 collapse into `tox -e py`; docs, release and the nox `format`
    // session (rewrites files) are not checks; ruff/mypy/pytest defaults are not added
    // because tox and nox already exercise Python.
    assert_eq!(
        drafted("python-tox-nox"),
        "\
lint = tox -e lint  <- tox.ini env \"lint\"
lint-2 = nox -s lint  <- noxfile.py session \"lint\"
type = tox -e type  <- tox.ini env \"type\"
type-check = nox -s type-check  <- noxfile.py session \"type-check\"
tox-py = tox -e py  <- tox.ini env \"py310\" (versioned envs run on the interpreter at hand)
tests = nox -s tests  <- noxfile.py session \"tests\"
--- skipped
"
    );
}

#[test]
fn go_module_with_a_makefile_uses_its_targets_and_not_the_go_defaults() {
    // install, docker-push (pushes an image), fmt (gofmt -w), clean and all are not checks;
    // `go vet`/`go test` defaults are not added because `make vet`/`make test` run them.
    assert_eq!(
        drafted("go-module"),
        "\
vet = make vet  <- Makefile target \"vet\"
lint = make lint  <- Makefile target \"lint\"
build = make build  <- Makefile target \"build\"
test = make test  <- Makefile target \"test\"
--- skipped
"
    );
}

#[test]
fn polyglot_ci_matrix_expands_only_the_dimensions_its_commands_use() {
    // `os` is not in any command: one local gate. `features` is: one gate per value, the
    // `include` entry's value too. The Makefile's `check` and package.json's scripts add
    // nothing, and say so: CI already runs cargo test, pytest, pnpm lint/build/test. The docs step's two
    // check lines are two gates, never one `&&` chain.
    assert_eq!(
        drafted("polyglot-matrix"),
        "\
fmt = cargo fmt --all -- --check  <- .github/workflows/ci.yml job lint step 6
lint = pnpm lint  <- .github/workflows/ci.yml job lint step 5
clippy-default = cargo clippy --all-targets --features default -- -D warnings [1800s]  <- .github/workflows/ci.yml job rust step 4 (matrix features=default)
clippy-full = cargo clippy --all-targets --features full -- -D warnings [1800s]  <- .github/workflows/ci.yml job rust step 4 (matrix features=full)
clippy-wasm = cargo clippy --all-targets --features wasm -- -D warnings [1800s]  <- .github/workflows/ci.yml job rust step 4 (matrix features=wasm)
build = cd web && pnpm build  <- .github/workflows/ci.yml job docs step 3 line 2
test-default = cargo test --features default [1200s]  <- .github/workflows/ci.yml job rust step 5 (matrix features=default)
test-full = cargo test --features full [1200s]  <- .github/workflows/ci.yml job rust step 5 (matrix features=full)
test-wasm = cargo test --features wasm [1200s]  <- .github/workflows/ci.yml job rust step 5 (matrix features=wasm)
pytest = cd py && pytest -q -k 'not slow'  <- .github/workflows/ci.yml job python step 4
test = cd web && pnpm test -- --reporter=dot  <- .github/workflows/ci.yml job docs step 3 line 3
--- skipped
.github/workflows/ci.yml job lint step 4 | pnpm install --frozen-lockfile | installs dependencies
.github/workflows/ci.yml job lint step 7 | echo \"building ${{ github.sha }}\" | uses `${{ github.sha }}`, which only GitHub Actions can evaluate
.github/workflows/ci.yml job rust step 6 | if [ \"$RUNNER_OS\" = \"Linux\" ]; then | a multi-line script with shell control flow; move it into a script file and gate on that
.github/workflows/ci.yml job python step 3 | python -m pip install --upgrade pip | only prepares the environment
.github/workflows/ci.yml job python step 5 | ./scripts/upload-coverage.sh | the step's name mentions `upload`: not a check
.github/workflows/ci.yml job python step 6 | ./scripts/smoke.ps1 | runs under `pwsh`; gates run under sh
.github/workflows/ci.yml job docs step 2 | ./scripts/check-links.sh | CI lets this step fail (continue-on-error)
.github/workflows/ci.yml job deploy-preview |  | the job's name mentions `deploy`: not a check
.github/workflows/release.yml |  | the workflow's name mentions `release`: not a check
package.json script \"lint\" | pnpm run lint | already run by `pnpm lint`, from a source that says more (CI, then package.json, then Makefile)
package.json script \"test\" | pnpm run test | already run by `cd web && pnpm test -- --reporter=dot`, from a source that says more (CI, then package.json, then Makefile)
package.json script \"build\" | pnpm run build | already run by `cd web && pnpm build`, from a source that says more (CI, then package.json, then Makefile)
Makefile target \"check\" | make check | already run by `cargo test --features default`, `cd py && pytest -q -k 'not slow'`, from a source that says more (CI, then package.json, then Makefile)
"
    );
}

/// more-itertools: `init` drafted `make check` (its prerequisite `requirements` runs `pip install
/// --upgrade` and `pip install --editable .`), `make docs` and `make package` (pip installs too),
/// and both `make coverage` and `make test` (the suite twice), out of CI order; and it read
/// `! [ -s diff.txt ]` as a glob.
#[test]
fn python_makefile_gates_leave_out_installs_and_the_suite_run_twice() {
    assert_eq!(
        drafted("python-make-ci"),
        "\
lint = make lint  <- Makefile target \"lint\"
diff = cat diff.txt && ! [ -s diff.txt ]  <- .github/workflows/python-app.yml job build step 7 line 2
coverage = make coverage  <- .github/workflows/python-app.yml job build step 5
--- skipped
.github/workflows/python-app.yml job build step 7 line 1 | git diff > diff.txt | prepares the git checkout; a setup line, not a gate (the check lines are drafted)
.github/workflows/python-app.yml job build step 3 | make requirements | runs `python -m pip install --upgrade pip` (through make requirements), which installs dependencies
.github/workflows/python-app.yml job build step 4 | make check | runs `python -m pip install --upgrade pip` (through make check → make requirements), which installs dependencies
.github/workflows/python-app.yml job build step 6 | make docs | runs `python -m pip install --upgrade pip` (through make docs → make requirements), which installs dependencies
.github/workflows/python-app.yml job build step 8 | make package | runs `python -m pip install --upgrade pip` (through make package → make requirements), which installs dependencies
Makefile target \"check\" | make check | runs `python -m pip install --upgrade pip` (through make check → make requirements), which installs dependencies
Makefile target \"test\" | make test | already run by `make coverage`, from a source that says more (CI, then package.json, then Makefile)
"
    );
}

/// An npm-workspaces repository (path-to-regexp and cookie) cloned without `node_modules`:
/// every drafted gate exited 127, one package's own scripts became gates CI never runs, and
/// `npm test` and `npm run test` were both drafted.
#[test]
fn npm_workspaces_name_the_install_drop_one_package_scripts_and_respellings() {
    assert_eq!(
        drafted("npm-workspaces"),
        "\
lint = npm run lint [setup: npm ci, because node_modules is absent here]  <- .github/workflows/ci.yml job lint step 4
test = npm test [setup: npm ci, because node_modules is absent here]  <- .github/workflows/ci.yml job test step 4
--- skipped
.github/workflows/ci.yml job lint step 3 | npm ci | installs dependencies
.github/workflows/ci.yml job test step 3 | npm ci | installs dependencies
npm workspace: package packages/cookie script \"test-ci\" |  | only this package defines it and CI never runs it
npm workspace: package packages/path-to-regexp script \"build\" |  | only this package defines it and CI never runs it
.github/workflows/ci.yml job test step 5 | npm run test | runs the same as the gate `npm test`, which is kept
package.json script \"lint\" | npm run lint | runs the same as the gate `npm run lint`, which is kept
package.json script \"test\" | npm run test | runs the same as the gate `npm test`, which is kept
"
    );
}

/// google/uuid: CI fetches modules, installs staticcheck and fetches a file before its checks,
/// and tests before it builds and vets.
#[test]
fn go_ci_leaves_out_fetches_and_installs_and_orders_cheap_gates_first() {
    assert_eq!(
        drafted("go-uuid-ci"),
        "\
vet = go vet ./...  <- .github/workflows/go.yml job build step 7
staticcheck = staticcheck ./...  <- .github/workflows/go.yml job build step 8
build = go build -v ./...  <- .github/workflows/go.yml job build step 6
test = go test -v ./...  <- .github/workflows/go.yml job build step 5
--- skipped
.github/workflows/go.yml job build step 3 | go get -v -t -d ./... | installs or fetches Go modules
.github/workflows/go.yml job build step 4 | go install honnef.co/go/tools/cmd/staticcheck@latest | installs or fetches Go modules
.github/workflows/go.yml job build step 9 | curl -sSfLo rfc9562.txt https://www.rfc-editor.org/rfc/rfc9562.txt | fetches from the network
"
    );
}

#[test]
fn every_fixture_renders_a_verify_yaml_v1_in_the_strict_subset() {
    for name in FIXTURES {
        let d = draft::draft(&fixture(name), &ALL).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!d.gates.is_empty(), "{name} drafted no gate");
        let yaml = draft::render_v1(&d.gates);
        check_strict_subset(name, &yaml);
        // A general YAML parser (as CommandMate's product loader uses) reads back the same
        // gates, byte for byte.
        let parsed: V1 =
            serde_saphyr::from_str(&yaml).unwrap_or_else(|e| panic!("{name}: {e}\n{yaml}"));
        assert_eq!(parsed.version, 1);
        assert_eq!(parsed.gates.len(), d.gates.len());
        for (p, g) in parsed.gates.iter().zip(&d.gates) {
            assert_eq!(p.id, g.id);
            assert_eq!(p.command, g.command);
            assert_eq!(p.timeout_sec, g.timeout_sec);
            assert!(draft::validate_id(&p.id), "{name}: bad id {}", p.id);
        }
        let mut ids: Vec<&str> = d.gates.iter().map(|g| g.id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), d.gates.len(), "{name}: ids must be unique");
    }
}

#[test]
fn no_fixture_ever_drafts_an_outward_command() {
    for name in FIXTURES {
        let d = draft::draft(&fixture(name), &ALL).unwrap_or_else(|e| panic!("{name}: {e}"));
        for g in &d.gates {
            let lower = g.command.to_ascii_lowercase();
            for word in [
                "deploy", "publish", "release", "upload", "push", "install", "--write", "--fix",
            ] {
                assert!(
                    !lower.contains(word),
                    "{name}: gate {} runs `{}`",
                    g.id,
                    g.command
                );
            }
        }
    }
}

#[test]
fn an_unreadable_root_is_an_error_naming_it() {
    let missing = fixture("does-not-exist");
    let err = draft::draft(&missing, &ALL)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("does-not-exist"), "{err}");
}

#[test]
fn a_broken_workflow_or_package_json_is_reported_not_fatal() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let wf = dir.path().join(".github/workflows");
    std::fs::create_dir_all(&wf).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(wf.join("ci.yml"), "jobs:\n  test:\n    steps: [\n")
        .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.path().join("package.json"),
        "{\"scripts\": {\"test\": }",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.path().join("go.mod"),
        "module example.com/x\n\ngo 1.22\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let d = draft::draft(dir.path(), &ALL).unwrap_or_else(|e| panic!("{e}"));
    let text = render(&d);
    assert!(
        text.contains(".github/workflows/ci.yml |  | not a readable workflow"),
        "{text}"
    );
    assert!(
        text.contains("package.json |  | not valid JSON at line 1"),
        "{text}"
    );
    assert!(
        text.starts_with(
            "vet = go vet ./...  <- go.mod (module example.com/x)\ntest = go test ./...  <- go.mod"
        ),
        "{text}"
    );
}

/// The v2 draft of every fixture is read back by greenlight's own v2 reader with the same
/// gates, needs and inputs; the text itself is pinned per fixture.
#[test]
fn every_fixture_renders_a_verify_yaml_v2_that_greenlight_reads_back() {
    for name in FIXTURES {
        let root = fixture(name);
        let d = draft::draft(&root, &ALL).unwrap_or_else(|e| panic!("{name}: {e}"));
        let plans = draft::plan_v2(&root, &d.gates);
        let yaml = draft::render_v2(&d.gates, &plans, &draft::DraftOptions::default());
        assert!(yaml.starts_with("version: 2\n"), "{name}:\n{yaml}");
        let loaded = greenlight_gate::config::parse(".greenlight/verify.yaml".into(), &yaml)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{yaml}"));
        assert_eq!(loaded.version(), 2, "{name}");
        assert_eq!(loaded.gates.len(), d.gates.len(), "{name}");
        for (index, (read, gate)) in loaded.gates.iter().zip(&d.gates).enumerate() {
            assert_eq!(read.id, gate.id, "{name}");
            assert_eq!(read.command, gate.command, "{name}");
            assert_eq!(
                Some(read.timeout_sec).filter(|t| *t != 600),
                gate.timeout_sec,
                "{name}"
            );
            let extra = loaded
                .gate_v2(index)
                .unwrap_or_else(|| panic!("{name}: no v2 part for {}", gate.id));
            assert_eq!(extra.needs, plans[index].needs, "{name} {}", gate.id);
            let inputs = plans[index].inputs.as_ref().map(|(g, _)| g.clone());
            assert_eq!(
                extra.inputs,
                inputs.unwrap_or_default(),
                "{name} {}",
                gate.id
            );
        }
        insta::assert_snapshot!(format!("v2-{name}"), yaml);
    }
}

/// The options block of a v2 draft reads back with the same values.
#[test]
fn the_v2_options_block_reads_back_with_the_same_values() {
    let d = draft::draft(&fixture("go-module"), &ALL).unwrap_or_else(|e| panic!("{e}"));
    let options = draft::DraftOptions {
        base_ref: Some((
            "origin/main".to_string(),
            vec!["why: it resolves".to_string()],
        )),
        skip_in_primary_checkout: Some((false, vec!["what it means".to_string()])),
        notes: vec!["a note: with a colon".to_string()],
    };
    let plans = draft::plan_v2(&fixture("go-module"), &d.gates);
    let yaml = draft::render_v2(&d.gates, &plans, &options);
    let loaded = greenlight_gate::config::parse(".greenlight/verify.yaml".into(), &yaml)
        .unwrap_or_else(|e| panic!("{e}\n{yaml}"));
    assert_eq!(loaded.options.base_ref.as_deref(), Some("origin/main"));
    assert!(!loaded.options.skip_in_primary_checkout);
    assert!(
        yaml.contains(
            "\n# a note: with a colon\noptions:\n  # why: it resolves\n  baseRef: \"origin/main\"\n"
        ),
        "{yaml}"
    );
}

const FIXTURES: [&str; 8] = [
    "python-make-ci",
    "go-uuid-ci",
    "npm-workspaces",
    "rust-workspace",
    "node-pnpm-monorepo",
    "python-tox-nox",
    "go-module",
    "polyglot-matrix",
];

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct V1 {
    version: u32,
    gates: Vec<V1Gate>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct V1Gate {
    id: String,
    command: String,
    #[serde(rename = "timeoutSec")]
    timeout_sec: Option<u32>,
}

/// The subset CommandMate's line-based runner reads: 2-space indentation, no tabs, one-line
/// scalars, no flow style, anchors or block scalars, comments only on their own lines.
fn check_strict_subset(name: &str, yaml: &str) {
    for (n, line) in yaml.lines().enumerate() {
        let at = format!("{name} line {}: {line:?}", n + 1);
        assert!(!line.contains('\t'), "{at}: tab");
        let indent = line.len() - line.trim_start().len();
        assert_eq!(indent % 2, 0, "{at}: indent");
        let body = line.trim_start();
        if body.starts_with('#') {
            assert_eq!(indent, 0, "{at}: comments at column 0");
            continue;
        }
        let value = body
            .trim_start_matches("- ")
            .split_once(": ")
            .map(|(_, v)| v)
            .unwrap_or("");
        assert!(
            !value.starts_with(['[', '{', '&', '*', '|', '>']),
            "{at}: flow/anchor/block"
        );
        if body.starts_with("command: ") {
            let inner = value.strip_prefix('"').and_then(|v| v.strip_suffix('"'));
            let inner = inner.unwrap_or_else(|| panic!("{at}: command must be double-quoted"));
            assert!(!inner.contains(['"', '\\']), "{at}: nothing to escape");
        }
    }
}

#[test]
fn the_clippy_default_denies_warnings_only_when_the_repositorys_ci_does() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        dir.path().join("Cargo.toml"),
        "[package]\nname = \"x\"\nversion = \"0.1.0\"\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let wf = dir.path().join(".github/workflows");
    std::fs::create_dir_all(&wf).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(
        wf.join("ci.yml"),
        "on: push\njobs:\n  lint:\n    runs-on: ubuntu-latest\n    steps:\n      - run: cargo clippy --all-targets -- -D warnings\n        continue-on-error: true\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let d = draft::draft(dir.path(), &ALL).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        d.gates.first().map(|g| g.command.as_str()),
        Some("cargo clippy --all-targets -- -D warnings"),
        "{}",
        render(&d)
    );
}

/// The options block stays in the strict subset, and a general YAML loader reads the same
/// values (`skipInPrimaryCheckout: false` as a boolean, the base ref as written).
#[test]
fn the_options_block_reads_the_same_in_a_yaml_loader() {
    let d = draft::draft(&fixture("go-module"), &ALL).unwrap_or_else(|e| panic!("{e}"));
    let options = draft::DraftOptions {
        base_ref: Some((
            "origin/main".to_string(),
            vec!["baseRef: why: it resolves".to_string()],
        )),
        skip_in_primary_checkout: Some((false, vec!["what it means".to_string()])),
        notes: Vec::new(),
    };
    let yaml = draft::render_v1_with(&d.gates, &options);
    check_strict_subset("options", &yaml);
    #[derive(serde::Deserialize)]
    struct WithOptions {
        options: Opts,
    }
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Opts {
        #[serde(rename = "baseRef")]
        base_ref: String,
        #[serde(rename = "skipInPrimaryCheckout")]
        skip: bool,
    }
    let parsed: WithOptions =
        serde_saphyr::from_str(&yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
    assert_eq!(parsed.options.base_ref, "origin/main");
    assert!(!parsed.options.skip);
    let config = greenlight_gate::config::parse_v1("verify.yaml".into(), &yaml)
        .unwrap_or_else(|e| panic!("{e}\n{yaml}"));
    assert_eq!(config.options.base_ref.as_deref(), Some("origin/main"));
    assert!(!config.options.skip_in_primary_checkout);
}

/// Inputs are left out (the whole workspace) wherever a narrower list could miss a file: a
/// package that reads above its directory, a package at the root, a test runner other than
/// cargo's, a `cd`.
#[test]
fn v2_inputs_are_left_out_wherever_a_narrower_list_could_miss_a_file() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let write = |path: &str, text: &str| {
        let full = dir.path().join(path);
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(full, text).unwrap_or_else(|e| panic!("{e}"));
    };
    write("Cargo.toml", "[workspace]\nmembers = [\"a\", \"b\"]\n");
    write(
        "a/Cargo.toml",
        "[package]\nname = \"a\"\nversion = \"0.1.0\"\n",
    );
    write("a/src/lib.rs", "pub fn a() {}\n");
    write(
        "b/Cargo.toml",
        "[package]\nname = \"b\"\nversion = \"0.1.0\"\n",
    );
    write(
        "b/src/lib.rs",
        "#![doc = include_str!(\"../../README.md\")]\n",
    );
    let gate = |id: &str, command: &str| draft::DraftGate {
        id: id.to_owned(),
        command: command.to_owned(),
        timeout_sec: None,
        source: "test".to_owned(),
        setup: None,
    };
    let gates = [
        gate("a", "cargo test -p a"),
        gate("b", "cargo test -p b"),
        gate("all", "cargo clippy --workspace"),
        gate("cd", "cd a && cargo test"),
        gate("ruff", "uv run ruff check ."),
        gate("pytest", "pytest -q"),
        gate("vet", "go vet ./..."),
        gate("gotest", "go test ./..."),
    ];
    let plans = draft::plan_v2(dir.path(), &gates);
    let has = |i: usize| plans[i].inputs.is_some();
    assert!(has(0), "package a reads only itself: {:?}", plans[0]);
    assert!(!has(1) && !has(2), "b reads ../../README.md: {plans:?}");
    assert!(!has(3), "a cd: {:?}", plans[3]);
    assert!(
        has(4) && !has(5),
        "ruff reads sources, pytest anything: {plans:?}"
    );
    assert!(
        has(6) && !has(7),
        "go vet compiles, go test runs: {plans:?}"
    );

    // A package at the root is the whole repository.
    write(
        "Cargo.toml",
        "[package]\nname = \"root\"\nversion = \"0.1.0\"\n\n[workspace]\nmembers = [\"a\"]\n",
    );
    let plans = draft::plan_v2(dir.path(), &gates[..1]);
    assert!(plans[0].inputs.is_some(), "a alone still is: {plans:?}");
    let plans = draft::plan_v2(dir.path(), &[gate("root", "cargo test")]);
    assert!(plans[0].inputs.is_none(), "{plans:?}");

    // A Go source that embeds files reads more than Go sources.
    write(
        "main.go",
        "package main\n\n//go:embed static\nvar static string\n",
    );
    let plans = draft::plan_v2(dir.path(), &gates[6..7]);
    assert!(plans[0].inputs.is_none(), "{plans:?}");
}
