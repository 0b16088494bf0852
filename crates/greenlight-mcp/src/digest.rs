//! The `digest` tool: text or a file in, the digest JSON contract out (what `greenlight digest
//! --json` prints), with the compact form as the answer's text when one exists.

use std::io::Read;
use std::path::Path;

use greenlight_digest::{Digest, DigestOptions, Format, StreamingDigester};
use schemars::JsonSchema;
use serde::Deserialize;

/// Arguments of `digest`: exactly one of `text` and `path`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DigestArgs {
    /// The output to digest.
    #[serde(default)]
    pub text: Option<String>,
    /// A file holding the output (absolute, or relative to the server's directory).
    #[serde(default)]
    pub path: Option<String>,
    /// The exit code of the process that printed it; without it the output's own summary
    /// decides success.
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// Read the output as this format instead of detecting it (`auto` detects).
    #[serde(default)]
    pub format: Option<String>,
    /// Byte budget of the compact form; when the whole digest does not fit, there is none.
    #[serde(default)]
    pub budget: Option<usize>,
}

/// Why the arguments cannot be digested (a protocol error: invalid params).
pub type BadArgs = String;

/// Digests what the arguments name.
pub fn run(args: &DigestArgs, cwd: &Path) -> Result<Digest, BadArgs> {
    let format = match args.format.as_deref() {
        None | Some("auto") => None,
        Some(name) => Some(Format::from_name(name).ok_or_else(|| {
            let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
            format!(
                "format `{name}` is unknown; use auto or one of: {}",
                names.join(", ")
            )
        })?),
    };
    let options = DigestOptions {
        budget: args.budget.unwrap_or(DigestOptions::default().budget),
        format,
        // The server runs in the repository its client works in, as a gate does.
        root: cwd.to_str().map(str::to_owned),
        ..DigestOptions::default()
    };
    let mut digester = StreamingDigester::new(options);
    match (&args.text, &args.path) {
        (Some(text), None) => digester.push(text.as_bytes()),
        (None, Some(path)) => {
            let path = cwd.join(path);
            let io = |e: std::io::Error| format!("path `{}`: {e}", path.display());
            let meta = std::fs::metadata(&path).map_err(io)?;
            if !meta.is_file() {
                return Err(format!(
                    "path `{}` is not a regular file; pass a file of test or build output",
                    path.display()
                ));
            }
            let mut file = std::fs::File::open(&path).map_err(io)?;
            let mut buf = vec![0u8; 64 << 10];
            loop {
                let n = file.read(&mut buf).map_err(io)?;
                if n == 0 {
                    break;
                }
                digester.push(&buf[..n]);
            }
        }
        (Some(_), Some(_)) => {
            return Err("pass either `text` or `path`, not both".into());
        }
        (None, None) => {
            return Err("pass the output as `text`, or a file of it as `path`".into());
        }
    }
    Ok(digester.finish(args.exit_code))
}
