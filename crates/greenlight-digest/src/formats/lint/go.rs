//! `go build` and `go vet` run on their own: `# package` before each package's findings,
//! `./file.go:line:col: message` (vet's type errors as `vet: ./file.go:…`), nothing else.
//!
//! One rule: a location is a finding only below a `# package` line, which the go command
//! prints before every package's findings (a test's own `file.go:12:` output never follows
//! one). Every finding is an error: both commands fail on it.

use super::{Dialect, Finding, Read, located};
use crate::model::{Format, Severity};

#[derive(Debug, Default)]
pub(super) struct Go {
    in_package: bool,
}

impl Dialect for Go {
    fn format(&self) -> Format {
        Format::GoBuild
    }

    fn closes(&self) -> bool {
        false
    }

    fn read(&mut self, t: &str) -> Read {
        if let Some(pkg) = t.strip_prefix("# ")
            && !pkg.is_empty()
            && (!pkg.contains(' ') || pkg.ends_with(']'))
        {
            self.in_package = true;
            return Read::Context;
        }
        if !self.in_package {
            return Read::No;
        }
        let row = t.strip_prefix("vet: ").unwrap_or(t);
        if let Some((file, l, c, msg)) = located(row, &[".go"]) {
            return Read::Finding(Finding::at(Severity::Error, file, Some(l), c).message(msg));
        }
        if t.starts_with("note: ") || t.starts_with("too many errors") {
            return Read::Context;
        }
        Read::No
    }
}
