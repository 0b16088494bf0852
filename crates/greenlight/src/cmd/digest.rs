//! `greenlight digest`: turn test or build output into exact, compact diagnostics.
//!
//! Reads a file, stdin, or the combined output of a command it runs (`-- CMD ARGS…`), and
//! prints the compact digest when one exists within the budget, or the digest's header and the
//! output's tail otherwise; `--json` prints the whole digest as one JSON object. With a command,
//! the command's own output is not echoed (only the digest is printed) and greenlight exits with
//! the command's exit code. The command runs like a gate (`greenlight-proc`): its own process
//! group, stdin from /dev/null, a drain limit, and whatever it leaves running is killed and
//! named on stderr; `--timeout` and greenlight's own ending signals end its whole group.
//! `--matcher FILE` adds GitHub problem matchers, read as a verify.yaml v2 gate's are.
//! Paths under the current directory (or `--root DIR`) are shown relative to it, as a gate's.

use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

use greenlight_digest::matchers::MatcherSet;
use greenlight_digest::{Digest, DigestOptions, Format, StreamingDigester};
use greenlight_gate::config::{MatcherFileError, read_matcher_file};
use greenlight_proc::{Ending, Input, Observer, Output, Program, Spec, Stream};

/// Exit code when greenlight itself cannot read the input or start the command.
const USAGE_ERROR: i32 = 2;

/// Exit code when `--timeout` ended the command, as `timeout(1)` and a timed-out gate report it.
const TIMED_OUT: i32 = 124;

/// Arguments of `greenlight digest`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Exit code of the process that produced the input. Without it the run's own summary
    /// decides success, and the JSON says the exit code was not given.
    #[arg(
        long,
        value_name = "N",
        allow_negative_numbers = true,
        conflicts_with = "command"
    )]
    exit_code: Option<i32>,

    /// Byte budget of the compact form; when the whole digest does not fit, there is none.
    #[arg(long, value_name = "BYTES", default_value_t = DigestOptions::default().budget)]
    budget: usize,

    /// Read the output as this format instead of detecting it.
    #[arg(long, value_name = "auto|NAME", default_value = "auto", value_parser = parse_format)]
    format: FormatArg,

    /// Print the digest as one JSON object.
    #[arg(long)]
    json: bool,

    /// A GitHub problem matcher file (the JSON `::add-matcher::` takes) that also reads the
    /// output, as a verify.yaml v2 gate's `matchers` do; repeat for several. A later file's
    /// owner replaces an earlier one's.
    #[arg(long = "matcher", value_name = "FILE")]
    matchers: Vec<PathBuf>,

    /// The command line that wrote the saved output (as `sh -c` would run it): whether it is
    /// one command or several (`a && b`, `a; b`) is part of the digest.
    #[arg(long = "command", value_name = "LINE", conflicts_with = "command")]
    command_line: Option<String>,

    /// The directory the output's command ran in: a failure's or finding's file under it is
    /// shown relative to it, as a gate's are to its repository. Default: the current directory
    /// (where a command after `--` runs).
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,

    /// The file to read (`-` or nothing: stdin).
    #[arg(value_name = "FILE|-", conflicts_with = "command")]
    file: Option<PathBuf>,

    /// With a command: end its whole process group after this long (SIGTERM, then SIGKILL 5 s
    /// later) and exit 124. Write e.g. 90s, 5m or 1500ms.
    #[arg(long, value_name = "DURATION", value_parser = crate::duration::parse_duration, requires = "command")]
    timeout: Option<Duration>,

    /// Run this command and digest its combined stdout and stderr.
    #[arg(last = true, value_name = "CMD")]
    command: Vec<String>,
}

#[derive(Debug, Clone, Copy)]
struct FormatArg(Option<Format>);

fn parse_format(s: &str) -> Result<FormatArg, String> {
    if s == "auto" {
        return Ok(FormatArg(None));
    }
    Format::from_name(s)
        .map(|f| FormatArg(Some(f)))
        .ok_or_else(|| {
            let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
            format!(
                "unknown format `{s}`; use auto or one of: {}",
                names.join(", ")
            )
        })
}

/// Runs the subcommand and returns the process exit code.
pub fn run(args: Args) -> i32 {
    let matchers = match read_matchers(&args.matchers) {
        Ok(set) => set,
        Err(message) => {
            errln!("greenlight digest: {message}");
            return USAGE_ERROR;
        }
    };
    let command = match &args.command_line {
        Some(line) => Some(line.clone()),
        None => (!args.command.is_empty()).then(|| command_line_of(&args.command)),
    };
    let root = match &args.root {
        Some(dir) => std::path::absolute(dir).ok(),
        None => std::env::current_dir().ok(),
    };
    let options = DigestOptions {
        budget: args.budget,
        format: args.format.0,
        matchers,
        command,
        root: root.as_deref().and_then(|d| d.to_str()).map(str::to_owned),
        ..DigestOptions::default()
    };
    let (digest, code) = if args.command.is_empty() {
        match read_input(&args, options) {
            // Digesting a file succeeded; the exit code it describes is in the digest.
            Ok(d) => (d, 0),
            Err(message) => {
                errln!("greenlight digest: {message}");
                return USAGE_ERROR;
            }
        }
    } else {
        match run_command(&args.command, args.timeout, options) {
            Ok((d, code)) => (d, code),
            Err(message) => {
                errln!("greenlight digest: {message}");
                return USAGE_ERROR;
            }
        }
    };
    let text = if args.json {
        format!("{}\n", digest.to_json())
    } else {
        digest.text()
    };
    out!("{text}");
    code
}

/// The command line `-- CMD ARGS…` stands for: the script of `sh -c SCRIPT` (or bash's), else
/// the words quoted as a shell would need them, so an argument holding `;` stays one word.
fn command_line_of(argv: &[String]) -> String {
    if let [shell, flag, script, ..] = argv
        && matches!(
            shell.rsplit('/').next(),
            Some("sh" | "bash" | "dash" | "zsh")
        )
        && flag == "-c"
    {
        return script.clone();
    }
    let plain = |w: &str| {
        !w.is_empty()
            && w.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
    };
    argv.iter()
        .map(|w| {
            if plain(w) {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Reads and checks the `--matcher` files, merged in order, as verify.yaml reads its matcher
/// files.
fn read_matchers(paths: &[PathBuf]) -> Result<MatcherSet, String> {
    let mut set = MatcherSet::default();
    for path in paths {
        let shown = path.display();
        let (_, parsed) = read_matcher_file(path, &shown.to_string()).map_err(|e| match e {
            MatcherFileError::Unreadable(reason) => {
                format!("cannot read the matcher file `{shown}` ({reason}); pass a readable file")
            }
            MatcherFileError::NotUtf8 => {
                format!("the matcher file `{shown}` is not UTF-8; save it as UTF-8")
            }
            MatcherFileError::Refused(e) => format!("the matcher file is refused: {e}"),
        })?;
        set.extend(parsed);
    }
    Ok(set)
}

fn read_input(args: &Args, options: DigestOptions) -> Result<Digest, String> {
    let mut digester = StreamingDigester::new(options);
    let mut buf = vec![0u8; 64 * 1024];
    let (mut reader, name): (Box<dyn Read>, String) = match &args.file {
        Some(path) if path.as_os_str() != "-" => {
            let f = std::fs::File::open(path).map_err(|e| {
                format!(
                    "cannot read `{}`: {e}; pass a readable file or `-` for stdin",
                    path.display()
                )
            })?;
            (Box::new(f), path.display().to_string())
        }
        _ => (Box::new(std::io::stdin().lock()), "stdin".to_owned()),
    };
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => digester.push(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("reading {name} failed: {e}")),
        }
    }
    Ok(match args.exit_code {
        Some(code) => digester.finish(Some(code)),
        None => digester.finish_without_exit_code(),
    })
}

/// Feeds the command's output to the digester as it arrives.
struct Digesting(StreamingDigester);

impl Observer for Digesting {
    fn chunk(&mut self, _stream: Stream, bytes: &[u8]) {
        self.0.push(bytes);
    }
}

/// Runs `command` like a gate (own process group, stdin closed, both output streams on one pipe
/// so they interleave as on a terminal) and digests what it writes. Leftovers are named on
/// stderr here, the only place this command prints them.
fn run_command(
    command: &[String],
    timeout: Option<Duration>,
    options: DigestOptions,
) -> Result<(Digest, i32), String> {
    let (program, rest) = command.split_first().ok_or("no command after `--`")?;
    let mut spec = Spec::new(
        Program::Argv {
            program: program.into(),
            args: rest.iter().map(Into::into).collect(),
        },
        ".",
    );
    spec.input = Input::Null;
    spec.output = Output::Interleaved;
    spec.deadline = timeout;
    spec.grace = crate::environment::get().kill_grace;
    // The digester keeps its own tail; the runner's is not used.
    spec.tail_bytes = 0;
    // Nothing else spawns while the command runs, so every adopted process is its.
    spec.claim_adopted = true;
    let mut digesting = Digesting(StreamingDigester::new(options));
    let outcome = greenlight_proc::run_main(|mut interrupt| {
        let spec = &spec;
        let digesting = &mut digesting;
        async move { greenlight_proc::run(spec, digesting, Some(&mut interrupt)).await }
    })
    .map_err(|e| format!("cannot start the async runtime: {e}"))?
    .map_err(|e| match e {
        greenlight_proc::Error::Spawn { source, .. } => {
            format!("cannot run `{program}`: {source}; check that it is installed and on PATH")
        }
        other => other.to_string(),
    })?;
    if !outcome.leftovers.is_empty() {
        errln!(
            "greenlight digest: `{program}` left {} process(es) running; they were killed:",
            outcome.leftovers.len()
        );
        for p in &outcome.leftovers {
            let how = if p.escaped {
                " (had left its group)"
            } else {
                ""
            };
            errln!("  pid {} {}{how}", p.pid, p.command);
        }
    }
    if outcome.pipe_left_open {
        errln!(
            "greenlight digest: something `{program}` started kept its output open and could not be found; the output may be incomplete"
        );
    }
    let code = match outcome.ended_by {
        Some(Ending::TimedOut) => {
            errln!(
                "greenlight digest: `{program}` ran out of its --timeout; its process group was ended"
            );
            TIMED_OUT
        }
        Some(Ending::Interrupted(signal)) => {
            errln!(
                "greenlight digest: interrupted by {}; `{program}` and its process group were ended",
                signal.name()
            );
            signal.exit_code()
        }
        None => outcome.exit.map_or(1, |e| e.as_shell_code()),
    };
    // A run greenlight ended, or one a signal ended, is never a clean run whatever it printed.
    let exit = match (outcome.ended_by, outcome.exit) {
        (None, Some(greenlight_proc::Exit::Code(c))) => Some(c),
        _ => None,
    };
    Ok((digesting.0.finish(exit), code))
}
