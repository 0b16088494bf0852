//! `greenlight digest`: turn test or build output into exact, compact diagnostics.
//!
//! Reads a file, stdin, or the combined output of a command it runs (`-- CMD ARGS…`), and
//! prints the compact digest when one exists within the budget, or the digest's header and the
//! output's tail otherwise; `--json` prints the whole digest as one JSON object. With a command,
//! the command's own output is not echoed (only the digest is printed) and greenlight exits with
//! the command's exit code.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use greenlight_digest::{Classification, Digest, DigestOptions, Format, StreamingDigester};

/// Exit code when greenlight itself cannot read the input or start the command.
const USAGE_ERROR: i32 = 2;

/// Exit code when the command was killed by a signal: 128 + signal, as a shell reports it.
const SIGNAL_BASE: i32 = 128;

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

    /// The file to read (`-` or nothing: stdin).
    #[arg(value_name = "FILE|-", conflicts_with = "command")]
    file: Option<PathBuf>,

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
    let options = DigestOptions {
        budget: args.budget,
        format: args.format.0,
        ..DigestOptions::default()
    };
    let (digest, code) = if args.command.is_empty() {
        match read_input(&args, options) {
            // Digesting a file succeeded; the exit code it describes is in the digest.
            Ok(d) => (d, 0),
            Err(message) => {
                eprintln!("greenlight digest: {message}");
                return USAGE_ERROR;
            }
        }
    } else {
        match run_command(&args.command, options) {
            Ok((d, code)) => (d, code),
            Err(message) => {
                eprintln!("greenlight digest: {message}");
                return USAGE_ERROR;
            }
        }
    };
    let text = if args.json {
        format!("{}\n", digest.to_json())
    } else {
        render(&digest)
    };
    let mut out = std::io::stdout().lock();
    // A closed stdout (a pipe to `head`) is not an error worth a panic.
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
    code
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

/// Runs `command` in its own process group with stdin closed, both output streams into one
/// pipe (so they interleave as on a terminal), and digests what it writes.
fn run_command(command: &[String], options: DigestOptions) -> Result<(Digest, i32), String> {
    use std::os::unix::process::{CommandExt, ExitStatusExt};

    let (program, rest) = command.split_first().ok_or("no command after `--`")?;
    let (mut reader, writer) =
        std::io::pipe().map_err(|e| format!("cannot create a pipe for `{program}`: {e}"))?;
    let writer2 = writer
        .try_clone()
        .map_err(|e| format!("cannot duplicate the pipe for `{program}`: {e}"))?;
    let mut cmd = Command::new(program);
    cmd.args(rest)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(writer2)
        .process_group(0);
    let mut child = cmd.spawn().map_err(|e| {
        format!("cannot run `{program}`: {e}; check that it is installed and on PATH")
    })?;
    // Our copies of the write end must close, or the read below never sees end of file.
    drop(cmd);
    let mut digester = StreamingDigester::new(options);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => digester.push(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    let status = child
        .wait()
        .map_err(|e| format!("waiting for `{program}` failed: {e}"))?;
    let (exit, code) = match (status.code(), status.signal()) {
        (Some(c), _) => (Some(c), c),
        (None, Some(sig)) => (None, SIGNAL_BASE + sig),
        (None, None) => (None, 1),
    };
    Ok((digester.finish(exit), code))
}

/// The text form: the compact digest, or a header with the reasons and the output's tail.
fn render(d: &Digest) -> String {
    if let Some(c) = &d.compact {
        return c.clone();
    }
    let mut out = String::new();
    let exit = match d.exit_code {
        Some(c) => format!("exit {c}"),
        None if d.exit_code_given => "killed".to_owned(),
        None => "exit ?".to_owned(),
    };
    let format = d
        .format
        .map_or("no known format".to_owned(), |f| f.name().to_owned());
    let class = match d.classification {
        Classification::Recognised => "recognised",
        Classification::Partial => "partial",
        Classification::Unrecognised => "unrecognised",
    };
    let reasons: Vec<&str> = d.reasons.iter().map(|r| r.name()).collect();
    out.push_str(&format!("{exit} · {format} · {class}"));
    if !reasons.is_empty() {
        out.push_str(&format!(" ({})", reasons.join(", ")));
    } else {
        out.push_str(" (the compact form does not fit the budget)");
    }
    out.push('\n');
    if !d.tail.is_empty() {
        out.push_str(&format!("--- last {} lines of {}\n", d.tail.len(), d.lines));
        for line in &d.tail {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}
