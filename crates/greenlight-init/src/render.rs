//! Ids and the verify.yaml text, version 1 and version 2.
//!
//! The one rule for v1: write only what CommandMate's strictest reader accepts — 2-space
//! indent, one-line double-quoted commands with nothing to escape, `#` comments at column 0 —
//! so the same file works under both of its runners and under greenlight. v2 is real YAML:
//! every string that YAML could read as something else is double-quoted and escaped.

use std::collections::HashSet;
use std::fmt::Write as _;

use super::DraftGate;
use super::plan::GatePlan;

/// Gate ids verify.yaml reserves for built-in gates.
const RESERVED_IDS: &[&str] = &["work-evidence", "env-clean", "scope"];

/// Longest gate id (`^[a-z0-9][a-z0-9-]{0,31}$`).
const MAX_ID_LEN: usize = 32;

/// True when `id` is a valid, non-reserved verify.yaml v1 gate id.
pub fn validate_id(id: &str) -> bool {
    let mut chars = id.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    first_ok
        && id.len() <= MAX_ID_LEN
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !RESERVED_IDS.contains(&id)
}

/// Sanitises `hint` into a valid id and makes it unique among `taken` (`test`, `test-2`, …).
pub(crate) fn unique_id(hint: &str, taken: &HashSet<String>) -> String {
    let mut base = String::new();
    for c in hint.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            base.push(c);
        } else if !base.is_empty() && !base.ends_with('-') {
            base.push('-');
        }
    }
    let mut base = base.trim_end_matches('-').to_string();
    if base.is_empty() {
        base = "check".to_string();
    }
    if RESERVED_IDS.contains(&base.as_str()) {
        base.push_str("-gate");
    }
    let fit = |s: &str, room: usize| -> String {
        let cut: String = s.chars().take(room).collect();
        cut.trim_end_matches('-').to_string()
    };
    let first = fit(&base, MAX_ID_LEN);
    if !taken.contains(&first) {
        return first;
    }
    (2..)
        .map(|n| {
            let suffix = format!("-{n}");
            format!("{}{suffix}", fit(&base, MAX_ID_LEN - suffix.len()))
        })
        .find(|candidate| !taken.contains(candidate))
        .unwrap_or(first)
}

/// Makes a command safe for a one-line double-quoted scalar: rewrites `"word"` shell quoting
/// to the equivalent `'word'` where the quoted text has nothing `sh` would expand, and
/// refuses what cannot be carried (a `"` that must stay, a backslash, a control character).
pub(crate) fn one_line_safe(command: &str) -> Result<String, String> {
    let command = command.trim();
    if command.is_empty() {
        return Err("empty command".to_string());
    }
    if command.chars().any(|c| c.is_control()) {
        return Err(
            "spans several lines or holds control characters; a verify.yaml v1 \
                    command is one line"
                .to_string(),
        );
    }
    if command.contains('\\') {
        return Err(
            "contains a backslash, which a verify.yaml v1 one-line command cannot \
                    carry the same way in every runner; put it in a script and gate on that"
                .to_string(),
        );
    }
    if !command.contains('"') {
        return Ok(command.to_string());
    }
    let mut out = String::new();
    let mut rest = command;
    while let Some(open) = rest.find('"') {
        let (before, after) = rest.split_at(open);
        let after = &after[1..];
        let Some(close) = after.find('"') else {
            return Err(unsafe_quote());
        };
        let inner = &after[..close];
        if inner.contains(['$', '`', '\'']) || before.matches('\'').count() % 2 == 1 {
            return Err(unsafe_quote());
        }
        out.push_str(before);
        out.push('\'');
        out.push_str(inner);
        out.push('\'');
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn unsafe_quote() -> String {
    "contains a double quote that cannot become a single quote; a verify.yaml v1 one-line \
     command cannot carry it the same way in every runner; put it in a script and gate on that"
        .to_string()
}

/// Renders gates as a verify.yaml v1 document, each gate preceded by a comment saying where
/// it came from.
pub fn render_v1(gates: &[DraftGate]) -> String {
    render_v1_with(gates, &super::DraftOptions::default())
}

/// [`render_v1`] followed by an `options:` block, each option preceded by the comment that
/// says why it has that value.
pub fn render_v1_with(gates: &[DraftGate], options: &super::DraftOptions) -> String {
    let mut out = render_gates(gates);
    if options.is_empty() {
        return out;
    }
    let comment = |out: &mut String, lines: &[String]| {
        for line in lines {
            let _ = writeln!(out, "# {}", line.replace(['\n', '\r'], " "));
        }
    };
    comment(&mut out, &options.notes);
    if options.base_ref.is_none() && options.skip_in_primary_checkout.is_none() {
        return out;
    }
    out.push_str("options:\n");
    if let Some((base, why)) = &options.base_ref {
        comment(&mut out, why);
        let _ = writeln!(out, "  baseRef: {base}");
    }
    if let Some((skip, why)) = &options.skip_in_primary_checkout {
        comment(&mut out, why);
        let _ = writeln!(out, "  skipInPrimaryCheckout: {skip}");
    }
    out
}

/// Renders gates as a verify.yaml v2 document: the same gates and options as
/// [`render_v1_with`], each gate with the `needs` and `inputs` of its [`GatePlan`] (same
/// order as `gates`; a missing plan adds nothing).
pub fn render_v2(gates: &[DraftGate], plans: &[GatePlan], options: &super::DraftOptions) -> String {
    let mut out = String::new();
    out.push_str("version: 2\n");
    out.push_str("# verify.yaml (v2), drafted by `greenlight init --v2`.\n");
    out.push_str("# Review every gate: it must be safe to run again and again.\n");
    out.push_str(
        "# Gates run in parallel (options.jobs, default: the number of CPUs); `needs` makes a\n\
         # gate wait for others to pass, and a gate whose need failed is skipped.\n",
    );
    out.push_str("gates:\n");
    let one_line = |s: &str| s.replace(['\n', '\r'], " ");
    for (index, gate) in gates.iter().enumerate() {
        let plan = plans.get(index);
        let _ = writeln!(out, "  # from {}", one_line(&gate.source));
        if let Some(setup) = &gate.setup {
            let _ = writeln!(out, "  # {}", one_line(&setup_note(setup)));
        }
        let _ = writeln!(out, "  - id: {}", yaml_id(&gate.id));
        let _ = writeln!(out, "    command: {}", yaml_string(&gate.command));
        if let Some(t) = gate.timeout_sec {
            let _ = writeln!(out, "    timeoutSec: {t}");
        }
        let Some(plan) = plan else { continue };
        if !plan.needs.is_empty() {
            let ids: Vec<String> = plan.needs.iter().map(|id| yaml_id(id)).collect();
            let _ = writeln!(out, "    needs: [{}]", ids.join(", "));
        }
        if let Some((globs, what)) = &plan.inputs {
            let _ = writeln!(
                out,
                "    # Draft inputs for the result cache, review them: {}.",
                one_line(what)
            );
            out.push_str(
                "    # A file the gate reads that is not listed replays a stale result; \
                 without\n    # `inputs` the whole workspace is hashed, which is always correct.\n",
            );
            out.push_str("    inputs:\n");
            for glob in globs {
                let _ = writeln!(out, "      - {}", yaml_string(glob));
            }
        }
    }
    if options.is_empty() {
        return out;
    }
    let comment = |out: &mut String, indent: &str, lines: &[String]| {
        for line in lines {
            let _ = writeln!(out, "{indent}# {}", one_line(line));
        }
    };
    comment(&mut out, "", &options.notes);
    if options.base_ref.is_none() && options.skip_in_primary_checkout.is_none() {
        return out;
    }
    out.push_str("options:\n");
    if let Some((base, why)) = &options.base_ref {
        comment(&mut out, "  ", why);
        let _ = writeln!(out, "  baseRef: {}", yaml_string(base));
    }
    if let Some((skip, why)) = &options.skip_in_primary_checkout {
        comment(&mut out, "  ", why);
        let _ = writeln!(out, "  skipInPrimaryCheckout: {skip}");
    }
    out
}

/// The line that names a gate's missing setup, in the draft and in the written file alike.
pub fn setup_note(setup: &super::Setup) -> String {
    format!("needs setup first: run `{}` ({})", setup.command, setup.why)
}

/// A YAML double-quoted scalar holding exactly `s`.
fn yaml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A gate id as YAML: plain when YAML reads it back as that string, quoted otherwise (`123`,
/// `0x1f`, `null`, `true`, `yes`).
fn yaml_id(id: &str) -> String {
    let special = matches!(
        id,
        "null" | "true" | "false" | "yes" | "no" | "on" | "off" | "y" | "n"
    );
    if special || id.starts_with(|c: char| c.is_ascii_digit()) {
        yaml_string(id)
    } else {
        id.to_owned()
    }
}

fn render_gates(gates: &[DraftGate]) -> String {
    let mut out = String::new();
    out.push_str("# verify.yaml (v1), drafted by `greenlight init`.\n");
    out.push_str("# Review every gate: it must be safe to run again and again.\n");
    out.push_str("version: 1\n");
    out.push_str("gates:\n");
    for gate in gates {
        let _ = writeln!(out, "# from {}", gate.source.replace(['\n', '\r'], " "));
        if let Some(setup) = &gate.setup {
            let _ = writeln!(out, "# {}", setup_note(setup).replace(['\n', '\r'], " "));
        }
        let _ = writeln!(out, "  - id: {}", gate.id);
        let _ = writeln!(out, "    command: \"{}\"", gate.command);
        if let Some(t) = gate.timeout_sec {
            let _ = writeln!(out, "    timeoutSec: {t}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_sanitised_bounded_unique_and_never_reserved() {
        let mut taken = HashSet::new();
        assert_eq!(unique_id("test:unit", &taken), "test-unit");
        assert_eq!(unique_id("Work Evidence", &taken), "work-evidence-gate");
        assert_eq!(unique_id("---", &taken), "check");
        let long = "a".repeat(40);
        assert_eq!(unique_id(&long, &taken).len(), 32);
        taken.insert("a".repeat(32));
        let second = unique_id(&long, &taken);
        assert_eq!(second, format!("{}-2", "a".repeat(30)));
        assert!(validate_id(&second));
    }

    #[test]
    fn double_quotes_become_single_quotes_only_when_equivalent() {
        assert_eq!(
            one_line_safe("pytest -k \"not slow\"").as_deref(),
            Ok("pytest -k 'not slow'")
        );
        assert!(one_line_safe("echo \"$HOME\"").is_err());
        assert!(one_line_safe("a \\\n b").is_err());
        assert!(one_line_safe("grep 'say \"hi\"' x").is_err());
    }
}
