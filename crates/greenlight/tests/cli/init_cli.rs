//! `greenlight init` through the real binary, on small repositories in temporary directories.

use std::ffi::OsStr;
use std::path::Path;

use greenlight_testkit::Cli;
use greenlight_testkit::files::{temp_dir, write_executable, write_file};

/// A small Node + Make repository: two scripts that are checks, one that deploys, one that
/// never ends, a Makefile with a test target and a release target.
fn node_repo() -> tempfile::TempDir {
    let repo = temp_dir();
    write_file(
        &repo.path().join("package.json"),
        r#"{
  "name": "shop",
  "scripts": {
    "lint": "eslint .",
    "test": "node --test",
    "dev": "vite",
    "deploy": "vercel deploy --prod"
  }
}
"#,
    );
    write_file(&repo.path().join("package-lock.json"), "{}\n");
    write_file(
        &repo.path().join("Makefile"),
        "check:\n\tnpm run lint\n\ttrue\nrelease:\n\tnpm publish\n",
    );
    repo
}

/// `init` drafts only gates whose program is on PATH. These tests must not depend on the machine
/// having npm, so they put a stand-in `npm` first on PATH (it is never run: no drafted gate runs
/// here, or the first run stops before the gates).
struct FakeNpm(tempfile::TempDir);

impl FakeNpm {
    fn new() -> Self {
        let bin = temp_dir();
        write_executable(&bin.path().join("npm"), "#!/bin/sh\nexit 0\n");
        FakeNpm(bin)
    }

    /// `init` with the stand-in first on PATH.
    fn init<const N: usize>(&self, args: [&str; N]) -> Cli {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![self.0.path().to_path_buf()];
        dirs.extend(std::env::split_paths(&path));
        let path = std::env::join_paths(dirs).expect("PATH entries without ':'");
        Cli::new(std::iter::once("init").chain(args)).env("PATH", path)
    }
}

const NODE_YAML: &str = "\
# verify.yaml (v1), drafted by `greenlight init`.
# Review every gate: it must be safe to run again and again.
version: 1
gates:
# from package.json script \"lint\"
  - id: lint
    command: \"npm run lint\"
# from Makefile target \"check\"
  - id: check
    command: \"make check\"
# from package.json script \"test\"
  - id: test
    command: \"npm run test\"
";

#[test]
fn init_prints_each_gate_with_its_source_and_writes_nothing() {
    let repo = node_repo();
    let dir = repo.path().to_string_lossy().into_owned();
    let out = FakeNpm::new().init(["--cwd", &dir]).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let stdout = out.stdout;
    let expected_head = "\
3 gates drafted:
  lint   npm run lint
         from package.json script \"lint\"
  check  make check
         from Makefile target \"check\"
  test   npm run test
         from package.json script \"test\"
";
    assert!(stdout.starts_with(expected_head), "{stdout}");
    assert!(
        stdout.contains(NODE_YAML),
        "the draft itself is shown: {stdout}"
    );
    assert!(stdout.contains("greenlight init --write"), "{stdout}");
    assert!(
        !stdout.contains("deploy") && !stdout.contains("publish"),
        "{stdout}"
    );
    assert!(!repo.path().join(".commandmate").exists());
}

#[test]
fn init_write_writes_the_config_runs_it_once_and_refuses_to_overwrite() {
    let repo = node_repo();
    let dir = repo.path().to_string_lossy().into_owned();
    let config = repo.path().join(".greenlight/verify.yaml");
    let npm = FakeNpm::new();

    let out = npm.init(["--cwd", &dir, "--write"]).run();
    let stdout = out.stdout;
    assert_eq!(
        std::fs::read_to_string(&config).ok().as_deref(),
        Some(NODE_YAML)
    );
    assert!(
        stdout.contains(&format!("wrote {}", config.display())),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("running it once: greenlight verify --cwd {dir}")),
        "{stdout}"
    );
    // Outside git the first run cannot judge (exit 2); init reports it and exits with its
    // own code, 0: the config was written.
    assert_eq!(out.code, 0, "{stdout}");
    assert!(stdout.contains("first run: exit 2 (no verdict"), "{stdout}");

    // Refuses to overwrite: exit 2, a clear message, the file unchanged.
    write_file(
        &config,
        "version: 1\ngates:\n  - id: mine\n    command: \"true\"\n",
    );
    let out = npm.init(["--cwd", &dir, "--write"]).run();
    assert_eq!(out.code, 2);
    let stderr = out.stderr;
    assert!(
        stderr.contains("already exists; nothing was written. Pass --force"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&config).ok().as_deref(),
        Some("version: 1\ngates:\n  - id: mine\n    command: \"true\"\n")
    );

    // --force replaces it and keeps the old one beside it.
    let out = npm.init(["--cwd", &dir, "--write", "--force"]).run();
    assert!(out.stdout.contains("wrote "), "{}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(&config).ok().as_deref(),
        Some(NODE_YAML)
    );
    let backup = repo.path().join(".greenlight/verify.yaml.greenlight.bak");
    assert_eq!(
        std::fs::read_to_string(backup).ok().as_deref(),
        Some("version: 1\ngates:\n  - id: mine\n    command: \"true\"\n")
    );
}

/// A repository that already uses CommandMate's `.commandmate/verify.yaml` keeps it: init
/// writes there (version 1, CommandMate's), and `--v2` is refused with the way to move it.
#[test]
fn init_keeps_commandmate_s_file_where_the_repository_uses_it_and_refuses_v2_there() {
    let repo = node_repo();
    let dir = repo.path().to_string_lossy().into_owned();
    let theirs = repo.path().join(".commandmate/verify.yaml");
    let mine = "version: 1\ngates:\n  - id: mine\n    command: \"true\"\n";
    write_file(&theirs, mine);
    let npm = FakeNpm::new();

    let v2 = npm
        .init(["--cwd", &dir, "--v2", "--write", "--force"])
        .run();
    assert_eq!(v2.code, 2, "{}", v2.render());
    assert!(
        v2.stderr.contains("`greenlight config move`"),
        "{}",
        v2.render()
    );
    assert_eq!(std::fs::read_to_string(&theirs).ok().as_deref(), Some(mine));

    let out = npm.init(["--cwd", &dir, "--write", "--force"]).run();
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(
        out.stdout.contains(&format!("wrote {}", theirs.display())),
        "{}",
        out.render()
    );
    assert_eq!(
        std::fs::read_to_string(&theirs).ok().as_deref(),
        Some(NODE_YAML)
    );
    assert!(!repo.path().join(".greenlight").exists());
}

#[test]
fn force_without_write_is_a_usage_error() {
    let repo = node_repo();
    let dir = repo.path().to_string_lossy().into_owned();
    let out = Cli::new(["init", "--cwd", &dir, "--force"]).run();
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("--write"), "{}", out.stderr);
}

#[test]
fn an_empty_repository_drafts_nothing_and_says_so() {
    let repo = temp_dir();
    write_file(&repo.path().join("README.md"), "# nothing to check\n");
    let dir = repo.path().to_string_lossy().into_owned();
    let out = Cli::new(["init", "--cwd", &dir, "--write"]).run();
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("found nothing to gate"),
        "{}",
        out.stderr
    );
    // Not "0 gates drafted:" followed by nothing.
    assert_eq!(out.stdout, "no gate drafted\n");
    assert!(!repo.path().join(".commandmate").exists());
}

#[test]
fn a_missing_directory_is_refused_with_its_name() {
    let out = Cli::new(["init", "--cwd", "/nonexistent/greenlight-init-test"]).run();
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("/nonexistent/greenlight-init-test"),
        "{}",
        out.stderr
    );
}

#[test]
fn skipped_commands_are_listed_with_their_reason() {
    let repo = temp_dir();
    write_file(
        &repo.path().join(".github/workflows/ci.yml"),
        "on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n      - run: npm ci\n      - run: npm test\n      - run: npx semantic-release\n",
    );
    let dir = repo.path().to_string_lossy().into_owned();
    let out = FakeNpm::new().init(["--cwd", &dir]).run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let stdout = out.stdout;
    assert!(stdout.starts_with("1 gate drafted:\n  test  npm test\n        from .github/workflows/ci.yml job test step 3\n"), "{stdout}");
    assert!(stdout.contains("\nnot drafted:\n"), "{stdout}");
    assert!(
        stdout.contains(
            "  .github/workflows/ci.yml job test step 2: installs dependencies\n    $ npm ci\n"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("  .github/workflows/ci.yml job test step 4: `semantic-release` looks like a release step\n    $ npx semantic-release\n"), "{stdout}");
}

/// The files of a tiny project whose CI runs one passing check.
fn add_ci_project(repo: &greenlight_testkit::TempRepo) {
    repo.write(
        ".github/workflows/ci.yml",
        "on: push\njobs:\n  check:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n      - run: sh ci/check.sh\n",
    );
    repo.write("ci/check.sh", "echo checked\n");
}

/// `init --write`, then the first `greenlight verify` a user would run: it must judge (0 or
/// 20), never stop at the config (2), find no work (21) or skip every gate (22).
fn init_then_verify(repo: &greenlight_testkit::TempRepo) -> (String, greenlight_testkit::Run) {
    let init = repo.greenlight(["init", "--write"]);
    assert_eq!(init.code, 0, "{}", init.render());
    assert!(
        init.stdout.contains("first run: exit 0 (passed"),
        "init's own first run judges: {}",
        init.render()
    );
    let yaml = repo.read(".greenlight/verify.yaml").unwrap_or_default();
    let verify = repo.greenlight(["verify"]);
    assert_eq!(verify.code, 0, "{yaml}\n{}", verify.render());
    assert!(
        verify.stdout.contains("GATE check PASS"),
        "the id says what the step runs: {}",
        verify.render()
    );
    (yaml, verify)
}

/// No remote (no origin/HEAD): the draft used to have no baseRef, and verify stopped at exit 2.
#[test]
fn init_write_in_a_repository_without_a_remote_writes_a_base_ref_that_resolves() {
    let repo = greenlight_testkit::TempRepo::primary();
    repo.git(&["symbolic-ref", "--delete", "refs/remotes/origin/HEAD"]);
    repo.git(&["update-ref", "-d", "refs/remotes/origin/main"]);
    add_ci_project(&repo);
    let (yaml, _) = init_then_verify(&repo);
    assert!(
        yaml.contains("# baseRef: origin/HEAD is not set here (no remote, or a clone without it), so work is counted from main, the default branch found.\n"),
        "{yaml}"
    );
    assert!(yaml.contains("\n  baseRef: main\n"), "{yaml}");
}

/// In an ordinary clone (a primary checkout) every gate used to be `SKIP
/// reason=primary-checkout` (exit 22).
#[test]
fn init_write_in_a_primary_checkout_turns_off_the_primary_checkout_skip_and_says_why() {
    let repo = greenlight_testkit::TempRepo::primary();
    add_ci_project(&repo);
    let (yaml, _) = init_then_verify(&repo);
    assert!(
        yaml.ends_with("options:\n# baseRef: origin/HEAD points at origin/main; work-evidence counts the commits and changes since HEAD left it.\n  baseRef: origin/main\n# skipInPrimaryCheckout: false, because this was drafted in the primary checkout (not a linked worktree).\n# With true (the default) every gate is skipped here, since a primary checkout is often where a live server runs;\n# set it to true if gates should run only in linked worktrees (git worktree add).\n  skipInPrimaryCheckout: false\n"),
        "{yaml}"
    );
}

/// A linked worktree keeps the default skip (gates run there) and counts from origin/HEAD.
#[test]
fn init_write_in_a_linked_worktree_keeps_the_primary_checkout_default() {
    let repo = greenlight_testkit::TempRepo::worktree();
    add_ci_project(&repo);
    let (yaml, _) = init_then_verify(&repo);
    assert!(yaml.contains("\n  baseRef: origin/main\n"), "{yaml}");
    assert!(!yaml.contains("skipInPrimaryCheckout"), "{yaml}");
}

/// A clean committed branch used to give `RESULT not_started` (exit 21). The written
/// verify.yaml is itself work until it is committed, and once committed the branch's commits
/// since the base count.
#[test]
fn init_write_on_a_clean_committed_branch_judges_before_and_after_committing_the_config() {
    let repo = greenlight_testkit::TempRepo::primary();
    repo.git(&["checkout", "-q", "-b", "feature"]);
    add_ci_project(&repo);
    repo.commit_all("project");
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
    init_then_verify(&repo);
    repo.commit_all("gates");
    let verify = repo.greenlight(["verify"]);
    assert_eq!(verify.code, 0, "{}", verify.render());
}

/// `init`'s exit code is its own (0 drafted), not the first verify run's (20 here):
/// docs/reference/exit-codes.md and `--help` say so. Nothing was changed yet, so the red gate
/// is suspect, not a failure of the user's work (it used to say "fix the code").
#[test]
fn init_write_reports_a_gate_red_on_the_untouched_tree_as_suspect_and_exits_zero() {
    let repo = greenlight_testkit::TempRepo::worktree();
    add_ci_project(&repo);
    repo.write("ci/check.sh", "echo broken >&2; exit 3\n");
    let init = repo.greenlight(["init", "--write"]);
    assert_eq!(init.code, 0, "{}", init.render());
    assert!(
        init.stdout.contains(
            "first run: exit 20 (written, but 1 gate is suspect: check fails on the untouched tree)\n\
             suspect: nothing has been changed yet, so a red gate here is not a failure of your \
             work; fix the gate or the setup it needs (or remove it) before judging work with it\n"
        ),
        "{}",
        init.render()
    );
    assert!(
        init.stdout.contains("GATE check FAIL exit=3"),
        "verify's own lines are shown: {}",
        init.render()
    );
    assert!(!init.stdout.contains("fix the code"), "{}", init.render());
    let help = repo.greenlight(["init", "--help"]);
    assert!(
        help.stdout.contains("Exit codes: 0 drafted") && help.stdout.contains("not returned"),
        "{}",
        help.stdout
    );
}

/// A directory for `PATH` holding `git` and `sh` and the given fake tools (each exits 0).
fn path_with(tools: &[&str]) -> tempfile::TempDir {
    let bin = temp_dir();
    for real in ["git", "sh"] {
        let found = ["/usr/bin", "/bin", "/usr/local/bin"]
            .iter()
            .map(|d| Path::new(d).join(real))
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("{real} is needed"));
        std::os::unix::fs::symlink(found, bin.path().join(real)).unwrap_or_else(|e| panic!("{e}"));
    }
    for tool in tools {
        write_executable(&bin.path().join(tool), "#!/bin/sh\nexit 0\n");
    }
    bin
}

fn init_with_path(repo: &Path, bin: &Path) -> String {
    let out = Cli::new([OsStr::new("init"), OsStr::new("--cwd"), repo.as_os_str()])
        .env("PATH", bin)
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.stdout
}

/// The Python package a newcomer tried: ids `exit` and `gate`, a multi-line step joined with
/// `&&` (a line dropped), `dist/*.whl` passed literally, no word that `uv` was missing, and the
/// same "not drafted" line three times.
#[test]
fn python_drafts_name_gates_by_what_they_run_and_list_what_cannot_run_here() {
    let repo = temp_dir();
    write_file(
        &repo.path().join(".github/workflows/ci.yml"),
        "on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n      - run: |\n          uv sync\n          uv run pytest\n          sh ci/lint.sh || exit 1\n      - run: check-wheel-contents dist/*.whl\n      - run: pytest || exit 1\n",
    );
    write_file(&repo.path().join("ci/lint.sh"), "exit 0\n");
    write_file(
        &repo.path().join("pyproject.toml"),
        "[project]\nname = \"weather\"\n\n[tool.ruff]\nline-length = 100\n\n[tool.mypy]\nstrict = true\n",
    );
    write_file(&repo.path().join("uv.lock"), "version = 1\n");
    // check-wheel-contents is not installed either: inspecting artifacts is the reason given.
    let bin = path_with(&["pytest"]);
    let stdout = init_with_path(repo.path(), bin.path());
    assert!(
        stdout.starts_with("2 gates drafted:\n  lint    sh ci/lint.sh || exit 1\n          from .github/workflows/ci.yml job test step 1 line 3\n  pytest  pytest || exit 1\n          from .github/workflows/ci.yml job test step 3\n"),
        "{stdout}"
    );
    for line in [
        "  .github/workflows/ci.yml job test step 1 line 1: installs dependencies; a setup line, not a gate (the check lines are drafted)\n    $ uv sync\n",
        "  .github/workflows/ci.yml job test step 1 line 2: `uv` is not on PATH here, so the gate could not run; install uv (or leave the gate out) and run `greenlight init` again\n    $ uv run pytest\n",
        "  .github/workflows/ci.yml job test step 2: its pattern `dist/*.whl` matches nothing here, so sh would pass it on literally; it inspects files an earlier CI step builds, which is not a check of the code\n",
    ] {
        assert_eq!(stdout.matches(line).count(), 1, "once: {line}\n{stdout}");
    }
    assert!(
        !stdout.contains("  exit  ") && !stdout.contains("  gate  "),
        "{stdout}"
    );
    assert!(
        !stdout.contains("ruff") && !stdout.contains("mypy"),
        "{stdout}"
    );
}

/// `[tool.ruff]` and `[tool.mypy]` tables alone drafted ruff and mypy gates although neither
/// was installed nor a dependency.
#[test]
fn ruff_and_mypy_need_a_dependency_or_an_install_not_just_a_tool_table() {
    let repo = temp_dir();
    write_file(
        &repo.path().join("pyproject.toml"),
        "[project]\nname = \"weather\"\n\n[tool.ruff]\nline-length = 100\n\n[tool.mypy]\nstrict = true\n",
    );
    write_file(
        &repo.path().join("tests/test_weather.py"),
        "def test_ok():\n    pass\n",
    );
    let bin = path_with(&["pytest"]);
    let stdout = init_with_path(repo.path(), bin.path());
    assert!(
        stdout.starts_with("1 gate drafted:\n  pytest  pytest\n"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("ruff") && !stdout.contains("mypy"),
        "{stdout}"
    );
    // Installed: configured and runnable here, so drafted.
    let bin = path_with(&["pytest", "ruff"]);
    let stdout = init_with_path(repo.path(), bin.path());
    assert!(stdout.contains("  ruff    ruff check .\n          from pyproject.toml (ruff: configured, and installed here)\n"), "{stdout}");
    assert!(!stdout.contains("mypy"), "{stdout}");
}

/// A Cargo workspace of two packages (`app` uses `util` by path) whose CI builds, then tests
/// the workspace, tests `util` alone and lints `app` alone. `cargo` is a stand-in that logs its
/// arguments to `calls` next to it, so the gates run in an instant.
fn cargo_workspace() -> (greenlight_testkit::TempRepo, tempfile::TempDir) {
    let repo = greenlight_testkit::TempRepo::worktree();
    repo.write(
        "Cargo.toml",
        "[workspace]\nresolver = \"2\"\nmembers = [\"crates/*\"]\n",
    );
    repo.write(
        "crates/app/Cargo.toml",
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nutil = { path = \"../util\" }\n",
    );
    repo.write("crates/app/src/main.rs", "fn main() {}\n");
    repo.write(
        "crates/util/Cargo.toml",
        "[package]\nname = \"util\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    repo.write("crates/util/src/lib.rs", "pub fn one() -> u8 { 1 }\n");
    repo.write(
        ".github/workflows/ci.yml",
        "on: push\njobs:\n  rust:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n      - run: cargo build --workspace\n      - run: cargo test --workspace\n      - run: cargo test -p util\n      - run: cargo clippy -p app\n",
    );
    let bin = path_with(&[]);
    let calls = bin.path().join("calls");
    write_executable(
        &bin.path().join("cargo"),
        &format!("#!/bin/sh\necho \"$*\" >> '{}'\n", calls.display()),
    );
    (repo, bin)
}

/// The YAML `init` prints between the gate list and "Not written.".
fn printed_yaml(stdout: &str) -> &str {
    let start = stdout
        .find("version: 2\n")
        .unwrap_or_else(|| panic!("{stdout}"));
    let end = stdout.find("\nNot written.").unwrap_or(stdout.len());
    &stdout[start..end]
}

#[test]
fn init_v2_drafts_needs_and_package_inputs_that_greenlights_reader_accepts() {
    let (repo, bin) = cargo_workspace();
    let out = repo.cli(["init", "--v2"]).env("PATH", bin.path()).run();
    assert_eq!(out.code, 0, "{}", out.render());
    assert!(
        out.stdout.contains("greenlight init --v2 --write"),
        "{}",
        out.stdout
    );
    assert!(!repo.path().join(".commandmate").exists());
    let yaml = printed_yaml(&out.stdout);
    let loaded = greenlight_gate::config::parse(".greenlight/verify.yaml".into(), yaml)
        .unwrap_or_else(|e| panic!("{e}\n{yaml}"));
    assert_eq!(loaded.version(), 2);
    let gate = |command: &str| {
        let index = loaded
            .gates
            .iter()
            .position(|g| g.command == command)
            .unwrap_or_else(|| panic!("no gate runs `{command}`:\n{yaml}"));
        (
            loaded.gates[index].id.clone(),
            loaded.gate_v2(index).cloned().unwrap_or_default(),
        )
    };
    let (build, build_v2) = gate("cargo build --workspace");
    let (_, test_v2) = gate("cargo test --workspace");
    let (_, util_v2) = gate("cargo test -p util");
    let (_, app_v2) = gate("cargo clippy -p app");
    assert_eq!(test_v2.needs, vec![build.clone()], "{yaml}");
    assert!(
        build_v2.needs.is_empty() && app_v2.needs.is_empty(),
        "{yaml}"
    );
    // `cargo test -p util` needs no build of its own selection: `cargo build --workspace` is
    // run another way.
    assert!(util_v2.needs.is_empty(), "{yaml}");
    // Per package: its directory and the workspace files, not the other package; `app` also
    // reads `util`, its path dependency.
    for file in ["Cargo.toml", "Cargo.lock", "crates/util"] {
        assert!(util_v2.inputs.iter().any(|i| i == file), "{file}: {yaml}");
        assert!(app_v2.inputs.iter().any(|i| i == file), "{file}: {yaml}");
    }
    assert!(!util_v2.inputs.iter().any(|i| i == "crates/app"), "{yaml}");
    assert!(app_v2.inputs.iter().any(|i| i == "crates/app"), "{yaml}");
    assert!(
        yaml.contains("    # Draft inputs for the result cache, review them:"),
        "{yaml}"
    );
}

#[test]
fn init_v2_write_writes_a_config_that_verify_runs_in_order() {
    let (repo, bin) = cargo_workspace();
    let init = repo
        .cli(["init", "--v2", "--write"])
        .env("PATH", bin.path())
        .run();
    assert_eq!(init.code, 0, "{}", init.render());
    let yaml = repo.read(".greenlight/verify.yaml").unwrap_or_default();
    assert!(yaml.starts_with("version: 2\n"), "{yaml}");
    assert!(
        init.stdout.contains("first run: exit 0 (passed"),
        "{yaml}\n{}",
        init.render()
    );
    let verify = repo.cli(["verify"]).env("PATH", bin.path()).run();
    assert_eq!(verify.code, 0, "{yaml}\n{}", verify.render());
    for id in ["build", "test"] {
        assert!(
            verify.stdout.contains(&format!("GATE {id} PASS")),
            "{}",
            verify.render()
        );
    }
    // Each run started the build before the test that needs it.
    let calls = std::fs::read_to_string(bin.path().join("calls")).unwrap_or_default();
    let lines: Vec<&str> = calls.lines().collect();
    let build = lines.iter().position(|l| *l == "build --workspace");
    let test = lines.iter().position(|l| *l == "test --workspace");
    assert!(build.is_some() && build < test, "{calls}");
}

/// The more-itertools shape through the real binary: installs left out with the chain that
/// leads to them, the suite drafted once, cheap gates first, and the missing tool's setup named.
#[test]
fn a_python_makefile_draft_leaves_out_installs_runs_the_suite_once_and_names_the_setup() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../greenlight-init/tests/fixtures/repos/python-make-ci");
    // make and cat are here; ruff and coverage are not (requirements were never installed).
    let bin = path_with(&["make", "cat"]);
    let stdout = init_with_path(&fixture, bin.path());
    assert!(
        stdout.starts_with(
            "3 gates drafted:
  lint      make lint
            from Makefile target \"lint\"
            needs setup first: run `make requirements` (`ruff` is not on PATH here)
  diff      cat diff.txt && ! [ -s diff.txt ]
            from .github/workflows/python-app.yml job build step 7 line 2
  coverage  make coverage
            from .github/workflows/python-app.yml job build step 5
            needs setup first: run `make requirements` (`coverage` is not on PATH here)
"
        ),
        "{stdout}"
    );
    for line in [
        "  .github/workflows/python-app.yml job build step 4: runs `python -m pip install --upgrade pip` (through make check → make requirements), which installs dependencies\n    $ make check\n",
        "  Makefile target \"test\": already run by `make coverage`, from a source that says more (CI, then package.json, then Makefile)\n    $ make test\n",
    ] {
        assert!(stdout.contains(line), "{line}\n{stdout}");
    }
    assert!(
        !stdout.contains("matches nothing"),
        "`[` is not a glob: {stdout}"
    );
}

/// An npm-workspaces clone without node_modules: every gate used to exit 127 on the first run.
/// Now each names `npm ci`, and `--write` runs none of them.
#[test]
fn init_write_does_not_run_gates_whose_setup_is_missing_and_names_it() {
    let repo = greenlight_testkit::TempRepo::worktree();
    repo.write(
        "package.json",
        "{\"name\": \"routing\", \"private\": true, \"workspaces\": [\"packages/*\"], \"scripts\": {\"test\": \"npm test --workspaces\"}}\n",
    );
    repo.write("package-lock.json", "{}\n");
    repo.write(
        "packages/cookie/package.json",
        "{\"name\": \"cookie\", \"scripts\": {\"test\": \"mocha\", \"lint\": \"eslint .\"}, \"devDependencies\": {\"mocha\": \"10.2.0\"}}\n",
    );
    repo.write(
        ".github/workflows/ci.yml",
        "on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n    steps:\n      - run: npm ci\n      - run: npm test\n      - run: npm run test\n",
    );
    let npm = FakeNpm::new();
    let out = npm
        .init(["--cwd", &repo.path().to_string_lossy(), "--write"])
        .run();
    assert_eq!(out.code, 0, "{}", out.stderr);
    let stdout = out.stdout;
    assert!(
        stdout.starts_with(
            "1 gate drafted:
  test  npm test
        from .github/workflows/ci.yml job test step 2
        needs setup first: run `npm ci` (node_modules is absent here)
"
        ),
        "{stdout}"
    );
    for line in [
        "  .github/workflows/ci.yml job test step 3: runs the same as the gate `npm test`, which is kept\n",
        "  npm workspace: package packages/cookie script \"lint\": only this package defines it and CI never runs it\n",
        "not run now, their setup is missing: test; run `npm ci` first, then `greenlight verify`\n",
    ] {
        assert!(stdout.contains(line), "{line}\n{stdout}");
    }
    assert!(!stdout.contains("running it once"), "{stdout}");
    let yaml = repo.read(".greenlight/verify.yaml").unwrap_or_default();
    assert!(
        yaml.contains(
            "# needs setup first: run `npm ci` (node_modules is absent here)\n  - id: test\n"
        ),
        "{yaml}"
    );
}

/// The `--v2` preview is the file `--v2 --write` writes, byte for byte (it was reported to
/// leave out the `version: 2` line).
#[test]
fn the_v2_preview_is_exactly_the_written_file() {
    let (repo, bin) = cargo_workspace();
    let preview = repo.cli(["init", "--v2"]).env("PATH", bin.path()).run();
    assert_eq!(preview.code, 0, "{}", preview.render());
    let start = preview
        .stdout
        .find("version: 2\n")
        .unwrap_or_else(|| panic!("{}", preview.stdout));
    let end = preview
        .stdout
        .find("\nNot written.")
        .unwrap_or_else(|| panic!("{}", preview.stdout));
    let shown = &preview.stdout[start..end];
    let write = repo
        .cli(["init", "--v2", "--write"])
        .env("PATH", bin.path())
        .run();
    assert_eq!(write.code, 0, "{}", write.render());
    let written = repo.read(".greenlight/verify.yaml").unwrap_or_default();
    assert!(written.starts_with("version: 2\n"), "{written}");
    assert_eq!(shown, written);
}
