//! What a shell command would do if a gate ran it: check, prepare the shell, install or fetch,
//! rewrite files, or reach the outside world.
//!
//! The one rule: when a command might change anything outside the worktree (publish, deploy,
//! push, upload, talk to a cloud), it is never a gate, even at the cost of refusing a harmless
//! one; and a command that installs or fetches is never a gate either, because a gate must be
//! safe and cheap to run again and again.

use greenlight_proc::shell::{program, segments, words};

/// The kind of check a command performs; the order is the order gates are drafted in (quick
/// and cheap first, so a failure is read early).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    Format,
    Lint,
    Typecheck,
    Other,
    Build,
    Test,
}

/// What a command is, as far as drafting gates is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CommandClass {
    /// A repeatable check: a gate candidate.
    Check(Kind),
    /// Prepares the shell or prints (`cd`, `export`, `echo`, `mkdir`); harmless inside a task.
    Setup(&'static str),
    /// Installs packages or fetches from the network (`pip install`, `npm ci`, `curl -o`,
    /// `git pull`): not a gate, and a task that runs it (through a recipe line, a make
    /// prerequisite or a script) is not a gate either.
    Installs(&'static str),
    /// Rewrites files in the worktree (formatters without `--check`, `--fix`); not a gate.
    Writes(&'static str),
    /// Changes the outside world or needs CI-only secrets; never a gate.
    Refused(String),
}

/// Programs that reach or change something outside the worktree whatever their arguments.
const REFUSED_PROGRAMS: &[&str] = &[
    "gh",
    "twine",
    "semantic-release",
    "kubectl",
    "helm",
    "aws",
    "gcloud",
    "az",
    "gsutil",
    "scp",
    "rsync",
    "ssh",
    "vercel",
    "netlify",
    "heroku",
    "fly",
    "flyctl",
    "firebase",
    "codecov",
    "coveralls",
    "sentry-cli",
    "ansible-playbook",
    "wrangler",
];

/// Word stems that mark an outward-facing action wherever they appear in a non-flag word
/// (`npm run deploy:prod`, `make release`, `./scripts/publish.sh`). Flags are exempt so that
/// `cargo build --release` stays a build.
const REFUSED_STEMS: &[&str] = &["deploy", "publish", "release", "upload"];

/// Package managers of the machine and of languages whose every use installs or fetches.
const INSTALL_PROGRAMS: &[&str] = &[
    "apt", "apt-get", "brew", "yum", "dnf", "apk", "choco", "pacman", "snap", "pip", "pip3",
    "pipx", "rustup", "nvm", "corepack", "curl", "wget", "gem", "bundle", "composer",
];

/// Programs that only prepare or inspect the environment.
const SETUP_PROGRAMS: &[&str] = &[
    "echo",
    "printf",
    "mkdir",
    "cp",
    "mv",
    "rm",
    "touch",
    "chmod",
    "chown",
    "ln",
    "cat",
    "ls",
    "pwd",
    "which",
    "sleep",
    "set",
    "source",
    ".",
    "ulimit",
    "unset",
    "true",
    "tee",
    "sccache",
    "ccache",
    "docker",
    "docker-compose",
    "podman",
    "export",
    "cd",
    "env",
    "date",
    "df",
    "free",
    "uname",
    "whoami",
    "id",
];

/// Classifies a whole one-line command: the most dangerous segment decides, then any segment
/// that rewrites files, then any that installs or fetches, then checks (the slowest kind
/// wins); a command made only of setup is setup.
pub(crate) fn classify(command: &str) -> CommandClass {
    if command.contains("${{") && command.contains("secrets.") {
        return CommandClass::Refused("uses CI secrets".to_string());
    }
    let mut verdicts: Vec<CommandClass> = segments(command)
        .iter()
        .map(|s| classify_segment(s))
        .collect();
    if let Some(pos) = verdicts
        .iter()
        .position(|v| matches!(v, CommandClass::Refused(_)))
    {
        return verdicts.swap_remove(pos);
    }
    if let Some(pos) = verdicts
        .iter()
        .position(|v| matches!(v, CommandClass::Writes(_)))
    {
        return verdicts.swap_remove(pos);
    }
    if let Some(pos) = verdicts
        .iter()
        .position(|v| matches!(v, CommandClass::Installs(_)))
    {
        return verdicts.swap_remove(pos);
    }
    let kind = verdicts
        .iter()
        .filter_map(|v| match v {
            CommandClass::Check(k) => Some(*k),
            _ => None,
        })
        .max();
    match kind {
        Some(k) => CommandClass::Check(k),
        None => verdicts
            .into_iter()
            .next()
            .unwrap_or(CommandClass::Setup("empty command")),
    }
}

fn classify_segment(segment: &str) -> CommandClass {
    classify_words(&words(segment))
}

fn classify_words(w: &[String]) -> CommandClass {
    let Some(first) = w.first() else {
        return CommandClass::Setup("only sets variables");
    };
    let prog = program(first).to_ascii_lowercase();
    // `sudo apt-get install x` and `! grep x` are judged by what they run.
    if matches!(prog.as_str(), "sudo" | "!" | "time" | "nice") && w.len() > 1 {
        return classify_words(&w[1..]);
    }
    let arg = |i: usize| w.get(i).map(|s| s.to_ascii_lowercase()).unwrap_or_default();
    let has = |flag: &str| w.iter().any(|x| x == flag);
    let sub = arg(1);

    if let Some(reason) = refused(&prog, &sub, w) {
        return CommandClass::Refused(reason);
    }
    if prog == "curl" || prog == "wget" {
        return CommandClass::Installs("fetches from the network");
    }
    if w.iter().any(|x| {
        x == "--fix"
            || x.starts_with("--fix=")
            || x == "--write"
            || x == "-w" && prog.starts_with("go")
    }) {
        return CommandClass::Writes("rewrites files (--fix/--write)");
    }
    match prog.as_str() {
        "git" => {
            return if sub == "diff" && (has("--exit-code") || has("--quiet")) {
                CommandClass::Check(Kind::Other)
            } else if matches!(
                sub.as_str(),
                "clone" | "pull" | "fetch" | "submodule" | "lfs"
            ) {
                CommandClass::Installs("fetches from the network (git)")
            } else {
                CommandClass::Setup("prepares the git checkout")
            };
        }
        "npm" | "pnpm" | "yarn" | "bun" => {
            if matches!(
                sub.as_str(),
                "install"
                    | "i"
                    | "ci"
                    | "add"
                    | "fetch"
                    | "dlx"
                    | "link"
                    | "rebuild"
                    | "update"
                    | "upgrade"
            ) {
                return CommandClass::Installs("installs dependencies");
            }
            // A bare `yarn` or `bun` installs, as `yarn install` does.
            if sub.is_empty() && matches!(prog.as_str(), "yarn" | "bun") {
                return CommandClass::Installs("installs dependencies");
            }
            if matches!(sub.as_str(), "" | "audit" | "config" | "cache" | "set") {
                return CommandClass::Setup("configures the package manager");
            }
        }
        "cargo" => match sub.as_str() {
            "install" | "fetch" | "binstall" | "update" | "generate-lockfile" | "audit" => {
                return CommandClass::Installs("installs or fetches");
            }
            "fmt" if !has("--check") => {
                return CommandClass::Writes("rewrites files (cargo fmt without --check)");
            }
            "fix" => return CommandClass::Writes("rewrites files (cargo fix)"),
            _ => {}
        },
        "go" => match sub.as_str() {
            "mod" | "get" | "install" => {
                return CommandClass::Installs("installs or fetches Go modules");
            }
            "env" | "version" | "work" => {
                return CommandClass::Setup("inspects the Go toolchain");
            }
            "generate" | "fmt" => {
                return CommandClass::Writes("rewrites files (go generate/go fmt)");
            }
            _ => {}
        },
        "python" | "python3" | "py"
            if sub == "-m" && matches!(arg(2).as_str(), "pip" | "venv" | "build" | "ensurepip") =>
        {
            return CommandClass::Installs("installs dependencies");
        }
        "uv" if matches!(
            sub.as_str(),
            "sync" | "pip" | "venv" | "lock" | "tool" | "python" | "add" | "build"
        ) =>
        {
            return CommandClass::Installs("installs dependencies");
        }
        "poetry" | "pdm" | "hatch" | "pipenv"
            if matches!(
                sub.as_str(),
                "install" | "lock" | "self" | "add" | "build" | "sync"
            ) =>
        {
            return CommandClass::Installs("installs dependencies");
        }
        "black" | "isort" if !has("--check") && !has("--check-only") => {
            return CommandClass::Writes("rewrites files (formatter without --check)");
        }
        "ruff" if sub == "format" && !has("--check") => {
            return CommandClass::Writes("rewrites files (ruff format without --check)");
        }
        "prettier" if !has("--check") && !has("-c") => {
            return CommandClass::Writes("rewrites files (prettier without --check)");
        }
        "gofmt" | "goimports" if !has("-l") && !has("-d") => {
            return CommandClass::Writes("rewrites files or only prints");
        }
        "npx" | "pnpx" if matches!(arg(1).as_str(), "playwright") && arg(2) == "install" => {
            return CommandClass::Installs("installs browsers");
        }
        _ => {}
    }
    if matches!(prog.as_str(), "pip" | "pip3") && sub == "download" {
        return CommandClass::Installs("fetches from the network");
    }
    if INSTALL_PROGRAMS.contains(&prog.as_str()) {
        return CommandClass::Installs("installs packages");
    }
    if SETUP_PROGRAMS.contains(&prog.as_str()) {
        return CommandClass::Setup("prepares the environment");
    }
    if prog == "tox" || prog == "nox" {
        // The environment's name says what it checks; `tox` itself says only "run something".
        let named = w
            .iter()
            .position(|x| matches!(x.as_str(), "-e" | "-s" | "--session"))
            .and_then(|i| w.get(i + 1))
            .map(|env| kind_of(std::slice::from_ref(env)));
        return CommandClass::Check(match named {
            Some(Kind::Other) | None => Kind::Test,
            Some(kind) => kind,
        });
    }
    CommandClass::Check(kind_of(w))
}

/// Why a segment is refused, if it is.
fn refused(prog: &str, sub: &str, w: &[String]) -> Option<String> {
    if REFUSED_PROGRAMS.contains(&prog) {
        return Some(format!(
            "`{prog}` reaches or changes something outside the worktree"
        ));
    }
    let outward = match prog {
        "git" => matches!(
            sub,
            "push" | "tag" | "commit" | "merge" | "rebase" | "reset" | "clean" | "stash"
        ),
        "docker" | "podman" => matches!(sub, "push" | "login" | "tag" | "rmi" | "system"),
        "npm" | "pnpm" | "yarn" | "bun" => {
            matches!(
                sub,
                "publish"
                    | "version"
                    | "login"
                    | "adduser"
                    | "unpublish"
                    | "deprecate"
                    | "dist-tag"
                    | "owner"
            )
        }
        "cargo" => matches!(sub, "publish" | "yank" | "login" | "owner" | "release"),
        "terraform" | "tofu" | "pulumi" => matches!(sub, "apply" | "destroy" | "import" | "up"),
        _ => false,
    };
    if outward {
        return Some(format!(
            "`{prog} {sub}` changes something outside the worktree"
        ));
    }
    for word in w.iter().filter(|x| !x.starts_with('-')) {
        let lower = word.to_ascii_lowercase();
        for part in lower.split(|c: char| !c.is_ascii_alphanumeric()) {
            if let Some(stem) = REFUSED_STEMS.iter().find(|s| part.starts_with(*s)) {
                return Some(format!("`{word}` looks like a {stem} step"));
            }
        }
    }
    None
}

/// The kind of check the words perform, from the first tool or subcommand name they mention:
/// `ruff check src tests` is a lint whatever its paths are called.
fn kind_of(w: &[String]) -> Kind {
    let has_check_flag = w
        .iter()
        .any(|x| x == "--check" || x == "-l" || x == "--check-only");
    for word in w.iter().filter(|x| !x.starts_with('-')) {
        let mut best: Option<Kind> = None;
        let mut bump = |k: Kind| best = Some(best.map_or(k, |b| b.max(k)));
        let lower = program(word).to_ascii_lowercase();
        for part in lower.split(|c: char| !c.is_ascii_alphanumeric()) {
            match part {
                "test" | "tests" | "pytest" | "jest" | "vitest" | "mocha" | "nextest" | "tox"
                | "nox" | "spec" | "e2e" | "playwright" | "cypress" | "unittest" | "ava" => {
                    bump(Kind::Test)
                }
                "build" | "compile" | "doc" | "docs" => bump(Kind::Build),
                "tsc" | "mypy" | "pyright" | "typecheck" | "type" | "types" | "typing" => {
                    bump(Kind::Typecheck)
                }
                "check" if !has_check_flag => bump(Kind::Lint),
                "clippy" | "lint" | "eslint" | "ruff" | "flake8" | "pylint" | "vet"
                | "golangci" | "shellcheck" | "hadolint" | "markdownlint" | "stylelint"
                | "biome" | "oxlint" | "deny" | "staticcheck" => bump(Kind::Lint),
                "fmt" | "format" | "prettier" | "black" | "gofmt" | "isort" | "rustfmt" => {
                    bump(Kind::Format)
                }
                _ => {}
            }
        }
        if let Some(kind) = best {
            return kind;
        }
    }
    Kind::Other
}

/// True when the command pipes one program into another (`a | b`, not `a || b`) outside
/// quotes: `sh` would then judge the last program's exit code, which hides a failing check.
pub(crate) fn has_pipe(command: &str) -> bool {
    let mut quote: Option<char> = None;
    let chars: Vec<char> = command.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c == '|' => {
                if chars.get(i + 1) == Some(&'|') {
                    i += 1;
                } else {
                    return true;
                }
            }
            None => {}
        }
        i += 1;
    }
    false
}

/// True when a command names a task runner's watch or interactive mode, which never ends.
pub(crate) fn never_ends(command: &str) -> bool {
    segments(command).iter().any(|s| {
        let w = words(s);
        w.iter().any(|x| {
            matches!(
                x.as_str(),
                "--watch" | "--watchAll" | "watch" | "--serve" | "serve" | "dev" | "start"
            )
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_builds_stay_checks_but_release_steps_are_refused() {
        assert_eq!(
            classify("cargo build --release"),
            CommandClass::Check(Kind::Build)
        );
        assert!(matches!(classify("make release"), CommandClass::Refused(_)));
        assert!(matches!(
            classify("npm run deploy:prod"),
            CommandClass::Refused(_)
        ));
        assert!(matches!(
            classify("cargo test && cargo publish"),
            CommandClass::Refused(_)
        ));
        assert!(matches!(
            classify("git push origin main"),
            CommandClass::Refused(_)
        ));
        assert!(matches!(
            classify("./scripts/upload-coverage.sh"),
            CommandClass::Refused(_)
        ));
        assert!(matches!(
            classify("curl -H \"t: ${{ secrets.TOKEN }}\" x"),
            CommandClass::Refused(_)
        ));
    }

    #[test]
    fn setup_and_writers_are_not_gates() {
        assert!(matches!(
            classify("pnpm install --frozen-lockfile"),
            CommandClass::Installs(_)
        ));
        assert!(matches!(
            classify("pip install -e .[dev]"),
            CommandClass::Installs(_)
        ));
        assert!(matches!(classify("mkdir -p out"), CommandClass::Setup(_)));
        assert!(matches!(classify("cargo fmt"), CommandClass::Writes(_)));
        assert!(matches!(
            classify("eslint . --fix"),
            CommandClass::Writes(_)
        ));
        assert_eq!(
            classify("cargo fmt --all -- --check"),
            CommandClass::Check(Kind::Format)
        );
    }

    /// Installing, publishing and fetching are never gates, whatever wraps them: more-itertools'
    /// `make requirements` ran `pip install --upgrade` on every verify.
    #[test]
    fn installs_publishes_and_fetches_are_never_checks() {
        for installs in [
            "python -m pip install --upgrade pip",
            "pip install --editable .",
            "npm ci",
            "uv sync",
            "poetry install",
            "go install ./cmd/x",
            "cargo install cargo-nextest",
            "sudo apt-get install -y jq",
            "brew install jq",
            "curl -sSfLo tool.tgz https://example.com/tool.tgz",
            "wget https://example.com/x",
            "git clone https://example.com/x",
            "git pull",
            "pip download x",
            "yarn",
            "npm ci && npm test",
        ] {
            assert!(
                matches!(classify(installs), CommandClass::Installs(_)),
                "{installs}: {:?}",
                classify(installs)
            );
        }
        for publishes in [
            "twine upload dist/*",
            "npm publish",
            "cargo publish",
            "docker push x",
            "gh release create v1",
        ] {
            assert!(
                matches!(classify(publishes), CommandClass::Refused(_)),
                "{publishes}"
            );
        }
    }

    #[test]
    fn the_slowest_kind_of_a_chain_wins() {
        assert_eq!(
            classify("cargo clippy && cargo test"),
            CommandClass::Check(Kind::Test)
        );
        assert_eq!(
            classify("RUSTFLAGS=-Dwarnings cargo clippy"),
            CommandClass::Check(Kind::Lint)
        );
        assert_eq!(
            classify("npx tsc --noEmit"),
            CommandClass::Check(Kind::Typecheck)
        );
        assert_eq!(
            classify("./scripts/verify-links.sh"),
            CommandClass::Check(Kind::Other)
        );
        // Paths named `tests` do not make a linter a test run.
        assert_eq!(
            classify("ruff check more_itertools tests"),
            CommandClass::Check(Kind::Lint)
        );
    }
}
