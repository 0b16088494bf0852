//! Wrapper lines: what npm, pnpm, yarn, make, just, tox, nox, uv and poetry print around the
//! tool they run (`> pkg@1.0.0 test`, `make: *** [Makefile:3: test] Error 1`, `py: exit 1 …`,
//! `nox > Session tests failed.`).
//!
//! One rule: a wrapper's line is noise, never the tool's output, so it neither ends a run nor
//! counts as output after its summary. Only whole lines of the wrappers' exact shapes are noise;
//! anything else stays significant, so a line the tool printed is never explained away.
//!
//! `pnpm -r` in its append-only form puts `packages/cookie test: ` before every line of a
//! package's run, once it has announced the run (`packages/cookie test$ node --test`). Those
//! lines are read through the prefix. Runs whose lines interleave cannot be read one by one:
//! that is reported, never guessed at.

/// Packages whose prefixes are remembered; more runs than this are read without theirs.
const MAX_PREFIXES: usize = 64;

/// What a wrapper's line says about the directory its runs print paths relative to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RunDir {
    /// A run starts, in this directory when the line names one (pnpm's `> pkg@1.0.0 test
    /// /abs/packages/cookie`, `make[1]: Entering directory '/abs/calc'`; npm's header names none).
    Starts(Option<String>),
    /// The run ended, in this directory when the line names one (`npm error path /abs/…`,
    /// pnpm's `/abs/packages/cookie:`, `make[1]: Leaving directory '/abs/calc'`).
    Ended(Option<String>),
}

/// Recognises the wrappers' lines. Keeps one bit of state: npm echoes the script's command on
/// the line after its `> pkg@version script` header.
#[derive(Debug, Default)]
pub(crate) struct Wrappers {
    /// The line number of npm's last `> pkg@version script` header: the line after it is the
    /// script's command.
    npm_header_at: Option<u64>,
    /// A wrapper's own header was seen, so a bare `/abs/path:` line is pnpm naming a package.
    wrapper_seen: bool,
    /// pnpm's announced runs: `packages/cookie test: `.
    prefixes: Vec<String>,
    /// The prefixes in the order their lines came, each once: a prefix seen again after
    /// another's lines means the runs interleave.
    order: Vec<usize>,
    /// The current line came through a prefix.
    prefixed: bool,
    /// Two runs' lines interleaved.
    pub(crate) interleaved: bool,
    /// What the last noise line said about its runs' directory, until taken.
    run_dir: Option<RunDir>,
}

impl Wrappers {
    /// The text a tool wrote on `text`: without pnpm's prefix when the line carries an
    /// announced one.
    pub(crate) fn through_prefix<'a>(&mut self, text: &'a str) -> &'a str {
        self.prefixed = false;
        if self.prefixes.is_empty() {
            return text;
        }
        let Some(i) = self
            .prefixes
            .iter()
            .position(|p| text.starts_with(p.as_str()))
        else {
            return text;
        };
        self.prefixed = true;
        if self.order.last() != Some(&i) {
            self.interleaved |= self.order.contains(&i);
            self.order.push(i);
        }
        &text[self.prefixes[i].len()..]
    }

    /// What the last wrapper line said about its runs' directory, once.
    pub(crate) fn take_run_dir(&mut self) -> Option<RunDir> {
        self.run_dir.take()
    }

    /// Whether `text` (line number `at`, as a terminal shows it, that no format claimed) is a
    /// wrapper's own line.
    pub(crate) fn noise(&mut self, text: &str, at: u64) -> bool {
        let noise = self.read(text, at);
        if noise {
            self.run_dir = run_dir(text.trim_end());
        }
        noise
    }

    /// `text`, a line a format claimed, as a wrapper line too: make's directory changes are
    /// also the context of a compiler's findings (the line-based parser claims them), and still
    /// say where the next run's paths are relative to.
    pub(crate) fn claimed(&mut self, text: &str) {
        let t = text.trim_end();
        if make(t) {
            self.run_dir = run_dir(t);
        }
    }

    fn read(&mut self, text: &str, at: u64) -> bool {
        let t = text.trim_end();
        if self.npm_header_at.is_some_and(|h| h + 1 == at) && t.starts_with("> ") {
            return true;
        }
        if npm_header(t) {
            self.npm_header_at = Some(at);
            self.wrapper_seen = true;
            return true;
        }
        if self.prefixed {
            // pnpm's own word on a run it prefixes.
            return t == "Failed" || t == "Done";
        }
        if let Some(prefix) = pnpm_run_header(t) {
            if self.prefixes.len() < MAX_PREFIXES && !self.prefixes.contains(&prefix) {
                self.prefixes.push(prefix);
            }
            self.wrapper_seen = true;
            return true;
        }
        let own = npm(t) || pnpm(t) || yarn(t) || make(t) || just(t) || tox(t) || nox(t) || uv(t);
        self.wrapper_seen |= own;
        own || (self.wrapper_seen && package_dir(t))
    }
}

/// The directory a wrapper's own line (`t`, known to be one) names for its run.
fn run_dir(t: &str) -> Option<RunDir> {
    if npm_header(t) {
        let dir = t.split(' ').nth(3).map(str::to_owned);
        return Some(RunDir::Starts(dir));
    }
    if let Some(dir) = t
        .strip_prefix("npm error path ")
        .or_else(|| t.strip_prefix("npm ERR! path "))
    {
        return Some(RunDir::Ended(Some(dir.trim().to_owned())));
    }
    if package_dir(t) {
        return Some(RunDir::Ended(Some(t.trim_end_matches(':').to_owned())));
    }
    let quoted = |r: &str| r.trim_matches(['\'', '`']).to_owned();
    let (_, msg) = t.split_once(": ")?;
    if !t.starts_with("make") && !t.starts_with("gmake") {
        return None;
    }
    if let Some(r) = msg.strip_prefix("Entering directory ") {
        return Some(RunDir::Starts(Some(quoted(r))));
    }
    msg.strip_prefix("Leaving directory ")
        .map(|r| RunDir::Ended(Some(quoted(r))))
}

/// `> cookie@1.0.0 test` (npm), `> cookie@1.0.0 test /abs/packages/cookie` (pnpm).
fn npm_header(t: &str) -> bool {
    let Some(rest) = t.strip_prefix("> ") else {
        return false;
    };
    let mut words = rest.split(' ');
    let (Some(pkg), Some(script)) = (words.next(), words.next()) else {
        return false;
    };
    // The name may be scoped (`@org/pkg@1.0.0`): the version follows the last `@`.
    let version_ok = pkg.rsplit_once('@').is_some_and(|(name, version)| {
        !name.is_empty() && version.starts_with(|c: char| c.is_ascii_digit())
    });
    let place_ok = match words.next() {
        None => true,
        Some(dir) => dir.starts_with('/') && words.next().is_none(),
    };
    version_ok && !script.is_empty() && place_ok
}

/// pnpm announcing a run it will prefix: `packages/cookie test$ node --test` → the prefix
/// `packages/cookie test: `.
fn pnpm_run_header(t: &str) -> Option<String> {
    let (head, command) = t.split_once("$ ")?;
    let (dir, script) = head.split_once(' ')?;
    let plain = |w: &str| !w.is_empty() && !w.contains(char::is_whitespace);
    (plain(dir) && plain(script) && !command.trim().is_empty() && !dir.ends_with(':'))
        .then(|| format!("{dir} {script}: "))
}

fn npm(t: &str) -> bool {
    [
        "npm error",
        "npm ERR!",
        "npm warn",
        "npm WARN",
        "npm notice",
    ]
    .iter()
    .any(|p| t.starts_with(p))
}

/// pnpm's own lines (`Scope: 2 of 3 workspace projects`, ` ERR_PNPM_…`, ` ELIFECYCLE …`,
/// `Exit status 1`, ` WARN  …`).
fn pnpm(t: &str) -> bool {
    let s = t.trim_start();
    (t.starts_with("Scope: ") && t.ends_with(" workspace projects"))
        || s.starts_with("ERR_PNPM_")
        || s.starts_with("ELIFECYCLE ")
        || s == "ELIFECYCLE"
        || (t.starts_with(" WARN ") && s.len() > 5)
        || t.strip_prefix("Exit status ").is_some_and(all_digits)
}

/// pnpm names the package whose script failed by its directory: `/abs/packages/cookie:`.
fn package_dir(t: &str) -> bool {
    t.starts_with('/') && t.ends_with(':') && !t.contains(' ')
}

fn yarn(t: &str) -> bool {
    t.starts_with("yarn run v")
        || t.starts_with("error Command failed with exit code ")
        || t.starts_with("info Visit https://yarnpkg.com/")
        || (t.starts_with("Done in ") && (t.ends_with('s') || t.ends_with("s.")))
}

/// make's own lines: `make: *** [Makefile:3: test] Error 1`, `make[1]: Entering directory
/// '/x/calc'`, `make: Target 'all' not remade because of errors.`, `make: 'a.o' is up to date.`
/// (also the context of a compiler's findings, `formats/lint/cc`).
pub(crate) fn make(t: &str) -> bool {
    let rest = t
        .strip_prefix("make")
        .or_else(|| t.strip_prefix("gmake"))
        .unwrap_or("");
    let rest = match rest.strip_prefix('[') {
        Some(r) => match r.split_once("]") {
            Some((depth, r)) if all_digits(depth) => r,
            _ => return false,
        },
        None => rest,
    };
    let Some(msg) = rest.strip_prefix(": ") else {
        return false;
    };
    msg.starts_with("*** ")
        || msg.starts_with("Entering directory ")
        || msg.starts_with("Leaving directory ")
        || msg.starts_with("Nothing to be done")
        || msg.starts_with("Target ")
        || msg.ends_with(" is up to date.")
}

/// `error: Recipe `test` failed on line 3 with exit code 1`.
fn just(t: &str) -> bool {
    t.starts_with("error: Recipe `") && t.contains("` failed on line ")
}

/// tox 4: `py: commands[0]> pytest`, `py: exit 1 (0.46 seconds) /x> pytest pid=1`,
/// `  py: FAIL code 1 (5.65 seconds)`, `  evaluation failed :( (5.72 seconds)`,
/// `  congratulations :) (1.1 seconds)`.
fn tox(t: &str) -> bool {
    let s = t.trim_start();
    if s.starts_with("evaluation failed :(") || s.starts_with("congratulations :)") {
        return true;
    }
    let Some((env, rest)) = s.split_once(": ") else {
        return false;
    };
    let env_ok = !env.is_empty()
        && env
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    env_ok
        && (rest.starts_with("commands[")
            || rest.starts_with("exit ")
            || rest.starts_with("FAIL code ")
            || rest.starts_with("OK (")
            || rest.starts_with("OK ✔")
            || rest.starts_with("SKIP ")
            || rest.starts_with("skipped because ")
            || [
                "install_deps>",
                "install_package>",
                "venv>",
                "freeze>",
                "_optional_hooks>",
            ]
            .iter()
            .any(|p| rest.starts_with(p)))
}

fn nox(t: &str) -> bool {
    t.starts_with("nox > ")
}

/// `uv run` and `poetry run` banners while they prepare the environment.
fn uv(t: &str) -> bool {
    let s = t.trim_start();
    [
        "Using CPython ",
        "Using Python ",
        "Creating virtual environment at: ",
        "Creating virtualenv ",
        "Installing dependencies from lock file",
    ]
    .iter()
    .any(|p| s.starts_with(p))
        // `Downloading pygments (1.2MiB)`, then ` Downloaded pygments`.
        || s.strip_prefix("Downloading ").is_some_and(|r| {
            r.split_once(" (")
                .is_some_and(|(name, size)| !name.contains(' ') && size.ends_with("B)"))
        })
        || (t.starts_with(' ')
            && s.strip_prefix("Downloaded ").is_some_and(|name| !name.contains(' ')))
        || [
            "Resolved ",
            "Prepared ",
            "Installed ",
            "Uninstalled ",
            "Audited ",
            "Built ",
        ]
        .iter()
        .any(|p| {
            s.strip_prefix(p).is_some_and(|r| {
                r.starts_with(|c: char| c.is_ascii_digit()) && r.contains(" package")
            })
        })
        || ((s.starts_with("+ ") || s.starts_with("- "))
            && t.starts_with(' ')
            && s[2..].contains("==")
            && !s[2..].contains(' '))
}

fn all_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapper_lines_are_noise() {
        let mut w = Wrappers::default();
        for (at, line) in [
            "> cookie@1.0.0 test",
            "> node --test",
            "npm error Lifecycle script `test` failed with error:",
            "make[1]: Entering directory '/x/calc'",
            "make: *** [Makefile:3: test] Error 2",
            "py: exit 1 (0.46 seconds) /x> pytest pid=23115",
            "  py: FAIL code 1 (5.65 seconds)",
            "  evaluation failed :( (5.72 seconds)",
            "nox > Session tests failed.",
            "Installed 5 packages in 11ms",
            "Downloading pygments (1.2MiB)",
            " Downloaded pygments",
            "Done in 0.52s.",
            " ERR_PNPM_RECURSIVE_RUN_FIRST_FAIL  cookie@1.0.0 test: `node --test`",
            "/x/packages/cookie:",
        ]
        .into_iter()
        .enumerate()
        {
            assert!(w.noise(line, at as u64), "{line}");
        }
    }

    #[test]
    fn pnpm_prefixes_are_read_through_and_interleaving_is_seen() {
        let mut w = Wrappers::default();
        assert!(w.noise("packages/a test$ node --test", 0));
        assert!(w.noise("packages/b test$ node --test", 1));
        assert_eq!(
            w.through_prefix("packages/a test: ✔ adds (1ms)"),
            "✔ adds (1ms)"
        );
        assert_eq!(w.through_prefix("packages/b test: ℹ tests 2"), "ℹ tests 2");
        assert!(!w.interleaved);
        assert_eq!(w.through_prefix("packages/a test: Failed"), "Failed");
        assert!(w.noise("Failed", 5));
        assert!(w.interleaved);
        assert_eq!(w.through_prefix("packages/c test: x"), "packages/c test: x");
    }

    #[test]
    fn wrapper_lines_name_their_runs_directories() {
        let mut w = Wrappers::default();
        for (line, dir) in [
            ("> cookie@1.0.0 test", RunDir::Starts(None)),
            (
                "> jar@1.0.0 test /x/packages/jar",
                RunDir::Starts(Some("/x/packages/jar".into())),
            ),
            (
                "npm error path /x/packages/jar",
                RunDir::Ended(Some("/x/packages/jar".into())),
            ),
            (
                "/x/packages/jar:",
                RunDir::Ended(Some("/x/packages/jar".into())),
            ),
            (
                "make[1]: Entering directory '/x/calc'",
                RunDir::Starts(Some("/x/calc".into())),
            ),
            (
                "make[1]: Leaving directory '/x/calc'",
                RunDir::Ended(Some("/x/calc".into())),
            ),
        ] {
            assert!(w.noise(line, 0), "{line}");
            assert_eq!(w.take_run_dir(), Some(dir), "{line}");
        }
        assert!(w.noise("make: *** [Makefile:3: test] Error 2", 0));
        assert_eq!(w.take_run_dir(), None);
    }

    #[test]
    fn the_tools_own_lines_are_not() {
        let mut w = Wrappers::default();
        for (at, line) in [
            "> 12 |   expect(x).toBe(1)",
            "test_x.py:3: AssertionError",
            "makefile: not a make line",
            "error: test failed",
            "E   assert 1 == 2",
            "/x/packages/cookie:",
            "py: something else",
            "Downloading fixtures from the cache",
        ]
        .into_iter()
        .enumerate()
        {
            assert!(!w.noise(line, at as u64 * 2), "{line}");
        }
    }
}
