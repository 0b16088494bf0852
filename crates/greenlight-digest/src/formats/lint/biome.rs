//! biome (`lint`, `check`, `format`): a finding's header `file:line:col rule  FIXABLE  ━━━`
//! (`file format ━━━` for a file to reformat), its indented block whose first marked line
//! (`× ` error, `! ` warning, `i ` info) is the message, and `Checked N files in 3ms.`,
//! `Found N errors.`, `Found N warnings.`, then the command's own `lint ━━━` trailer.
//!
//! One rule: a header is a finding only once its message line follows.

use super::{Count, Dialect, Finding, Read, number_of};
use crate::model::{Format, Severity};

const RULE: &str = " ━━━";

#[derive(Debug, Default)]
pub(super) struct Biome {
    /// The header read, waiting for its message: (file, line, column, rule).
    header: Option<(String, Option<u32>, Option<u32>, String)>,
    /// Inside a finding's or the trailer's indented block.
    in_block: bool,
    /// A header's first line was not its message: the message was lost.
    lost: bool,
}

impl Dialect for Biome {
    fn format(&self) -> Format {
        Format::Biome
    }

    fn closes(&self) -> bool {
        true
    }

    fn pending(&self) -> bool {
        self.header.is_some() || self.lost
    }

    fn read(&mut self, t: &str) -> Read {
        if t.is_empty() {
            return Read::Context;
        }
        if !t.starts_with(' ')
            && let Some((head, _)) = t.split_once(RULE)
        {
            let mut words = head.split_whitespace();
            let (Some(at), rule) = (words.next(), words.next()) else {
                return Read::No;
            };
            self.in_block = true;
            let Some(rule) = rule else {
                // The command's trailer: `lint ━━━`, then `× Some errors were emitted…`.
                self.header = None;
                return Read::Own;
            };
            let (file, l, c) = match super::super::util::location(at) {
                Some((f, l, c)) => (f, Some(l), c),
                None => (at, None, None),
            };
            self.header = Some((file.to_owned(), l, c, rule.to_owned()));
            return Read::Own;
        }
        if self.in_block
            && let Some(s) = t.strip_prefix("  ")
        {
            // Plain markers, and the ones biome prints when it colours its output.
            let marked = [
                ("× ", Severity::Error),
                ("✖ ", Severity::Error),
                ("! ", Severity::Warning),
                ("⚠ ", Severity::Warning),
                ("i ", Severity::Warning),
                ("ℹ ", Severity::Warning),
            ]
            .into_iter()
            .find_map(|(m, sev)| s.strip_prefix(m).map(|msg| (sev, msg)));
            // The message is the first line of the block; anything else first means it was lost.
            if marked.is_none() && !s.trim().is_empty() && self.header.take().is_some() {
                self.lost = true;
            }
            if let Some((severity, msg)) = marked
                && let Some((file, l, c, rule)) = self.header.take()
            {
                return Read::Finding(
                    Finding::at(severity, &file, l, c)
                        .code(Some(&rule))
                        .message(msg),
                );
            }
            return Read::Context;
        }
        self.in_block = false;
        // `Checked 2 files in 4ms. No fixes applied.` (deno's has no time).
        if t.starts_with("Checked ") && t.contains(" file") && t.contains(" in ") {
            return Read::Closing;
        }
        if let Some(rest) = t.strip_prefix("Found ") {
            let rest = rest.trim_end_matches('.');
            let count = if rest.ends_with(" error") || rest.ends_with(" errors") {
                Count {
                    errors: number_of(rest, "error"),
                    ..Count::default()
                }
            } else if rest.ends_with(" warning") || rest.ends_with(" warnings") {
                Count {
                    others: number_of(rest, "warning"),
                    ..Count::default()
                }
            } else if rest.ends_with(" info") || rest.ends_with(" infos") {
                Count {
                    others: number_of(rest, "info"),
                    ..Count::default()
                }
            } else {
                return Read::No;
            };
            return Read::Count(count);
        }
        Read::No
    }
}
