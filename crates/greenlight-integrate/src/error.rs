//! The one error type of this crate: every variant names the input at fault and the way out.

use std::path::PathBuf;

/// Everything that can go wrong while drafting a config or installing a hook or the MCP server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A directory or file could not be read.
    #[error("cannot read {path}: {source}; check that it exists and is readable")]
    Read {
        /// The path that could not be read.
        path: PathBuf,
        /// The underlying I/O error.
        source: std::io::Error,
    },
    /// A file could not be written (or its backup could not be made).
    #[error("cannot write {path}: {source}; check the directory's permissions and free space")]
    Write {
        /// The path that could not be written.
        path: PathBuf,
        /// The underlying I/O error.
        source: std::io::Error,
    },
    /// A hook settings file is not valid JSON; greenlight refuses to touch it.
    #[error(
        "{path}:{line}:{column}: not valid JSON ({message}); fix the file by hand (greenlight \
         left it untouched) and run the command again"
    )]
    InvalidJson {
        /// The settings file.
        path: PathBuf,
        /// 1-based line of the fault.
        line: usize,
        /// 1-based column of the fault.
        column: usize,
        /// What the JSON parser found.
        message: String,
    },
    /// An agent settings file is not valid TOML; greenlight refuses to touch it.
    #[error(
        "{path}:{line}:{column}: not valid TOML ({message}); fix the file by hand (greenlight \
         left it untouched) and run the command again"
    )]
    InvalidToml {
        /// The settings file.
        path: PathBuf,
        /// 1-based line of the fault.
        line: usize,
        /// 1-based column of the fault.
        column: usize,
        /// What the TOML parser found.
        message: String,
    },
    /// A TOML settings file would not come back byte for byte from greenlight's editor.
    #[error(
        "{path}: greenlight cannot edit this file without changing bytes outside its own entry \
         (it mixes \\r\\n and \\n line ends); give every line the same line end, then run the \
         command again (greenlight left the file untouched)"
    )]
    NotKeptAsWritten {
        /// The settings file.
        path: PathBuf,
    },
    /// A settings file parses, but a key greenlight must edit has an unexpected type.
    #[error(
        "{path}:{line}:{column}: `{pointer}` must be {expected}, found {found}; fix the file by \
         hand (greenlight left it untouched) and run the command again"
    )]
    UnexpectedShape {
        /// The settings file.
        path: PathBuf,
        /// 1-based line where the value (or its table header) starts.
        line: usize,
        /// 1-based column where it starts.
        column: usize,
        /// Where in the document, e.g. `hooks.Stop[0].hooks`.
        pointer: String,
        /// What greenlight needs there.
        expected: &'static str,
        /// What the file holds there.
        found: &'static str,
    },
    /// A hook settings file names the same key twice in one object.
    #[error(
        "{path}:{line}:{column}: the key `{key}` appears twice in the same object; agents read \
         only one of the copies, so greenlight will not guess which: merge them by hand \
         (greenlight left the file untouched) and run the command again"
    )]
    DuplicateKey {
        /// The settings file.
        path: PathBuf,
        /// 1-based line of the second copy.
        line: usize,
        /// 1-based column of the second copy.
        column: usize,
        /// The repeated key.
        key: String,
    },
    /// A hook settings file is read-only: someone made it so on purpose.
    #[error(
        "{path} is read-only; greenlight does not replace a file its owner protected. Make it \
         writable (chmod u+w) if greenlight should change it, then run the command again"
    )]
    ReadOnly {
        /// The settings file.
        path: PathBuf,
    },
    /// The backup path holds something other than a regular file (a symlink, a directory).
    #[error(
        "{path} exists and is not a regular file (a symlink or a directory); greenlight will not \
         write a backup through it. Remove it, then run the command again"
    )]
    BackupNotRegular {
        /// The backup path.
        path: PathBuf,
    },
    /// A project settings path leads (through a symlink) outside the project.
    #[error(
        "{path} leads to {target}, outside the project; greenlight edits a project's settings \
         only inside it (a cloned repository can ship such a symlink). Remove the symlink, or \
         use --scope user for your own settings"
    )]
    OutsideProject {
        /// The settings path as named.
        path: PathBuf,
        /// Where it leads.
        target: PathBuf,
    },
    /// A file exists but cannot be used: not a regular file, or too large.
    #[error("cannot use {path}: {reason}; replace it with a regular file")]
    Unusable {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The user-level settings directory cannot be found because `HOME` is not set.
    #[error(
        "cannot find the user-level {agent} settings: neither {override_var} nor HOME is set; \
         set HOME or use --scope project"
    )]
    NoHome {
        /// Which agent's settings were asked for.
        agent: &'static str,
        /// The environment variable that overrides the agent's config directory.
        override_var: &'static str,
    },
    /// A settings file changed between reading and writing it.
    #[error(
        "{path} changed while greenlight was editing it; nothing was written, run the command again"
    )]
    ChangedUnderfoot {
        /// The settings file.
        path: PathBuf,
    },
    /// A child process could not be started.
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        /// The program that was to be started.
        program: String,
        /// The underlying I/O error.
        source: std::io::Error,
    },
}

impl Error {
    /// True when the fault is in a file the user controls (bad JSON, bad shape): the command
    /// should exit with the configuration-error code rather than the generic failure code.
    pub fn is_user_input(&self) -> bool {
        matches!(
            self,
            Error::InvalidJson { .. }
                | Error::InvalidToml { .. }
                | Error::NotKeptAsWritten { .. }
                | Error::UnexpectedShape { .. }
                | Error::NoHome { .. }
                | Error::DuplicateKey { .. }
                | Error::ReadOnly { .. }
                | Error::BackupNotRegular { .. }
                | Error::Unusable { .. }
                | Error::OutsideProject { .. }
        )
    }
}
