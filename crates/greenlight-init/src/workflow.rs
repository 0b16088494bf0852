//! GitHub Actions workflows: every `run:` step of every job is a candidate gate.
//!
//! The one rule for `${{ matrix.x }}`: a matrix dimension the command does not mention (the OS,
//! the toolchain a setup action installs) describes where CI runs and collapses to one local
//! gate; a dimension the command does mention (`--features ${{ matrix.features }}`) changes
//! what is checked, so the step becomes one gate per value (at most [`MAX_EXPANSION`]). Any
//! other `${{ … }}` (secrets, `github.*`, step outputs) exists only inside Actions, and the step
//! is skipped with that reason.

use std::path::Path;

use greenlight_proc::shell;
use regex::Regex;
use serde_json::Value;

use super::classify::{self, CommandClass};
use super::{Candidate, Found, hint_from_command};

/// Most gates one matrix step may expand into; a larger matrix is skipped with a reason.
const MAX_EXPANSION: usize = 8;

/// Shells whose scripts `sh -c` runs the same way.
const POSIX_SHELLS: &[&str] = &["bash", "sh"];

/// Words that mark a workflow, job or step as outward-facing as a whole.
const OUTWARD: &[&str] = &["deploy", "publish", "release", "upload", "pages"];

#[derive(serde::Deserialize)]
struct Workflow {
    #[serde(default)]
    jobs: serde_json::Map<String, Value>,
}

/// True when the repository has a GitHub Actions workflow file: it has CI, whose `run:` steps
/// say what the project gates on.
pub(crate) fn exists(root: &Path) -> bool {
    std::fs::read_dir(root.join(".github").join("workflows")).is_ok_and(|entries| {
        entries.filter_map(|e| e.ok()).any(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.ends_with(".yml") || name.ends_with(".yaml")
        })
    })
}

/// Scans `.github/workflows/*.yml` and `*.yaml` in name order.
pub(crate) fn scan(root: &Path, found: &mut Found) {
    let dir = root.join(".github").join("workflows");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return;
    };
    let mut files: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".yml") || n.ends_with(".yaml"))
        .collect();
    files.sort();
    for name in files {
        let rel = format!(".github/workflows/{name}");
        let stem = name.rsplit_once('.').map_or(name.as_str(), |(s, _)| s);
        if let Some(word) = outward_word(stem) {
            found.skip(
                &rel,
                "",
                format!("the workflow's name mentions `{word}`: not a check"),
            );
            continue;
        }
        let text = match super::read_source(&dir.join(&name)) {
            Ok(Some(text)) => text,
            Ok(None) => continue,
            Err(reason) => {
                found.skip(&rel, "", reason);
                continue;
            }
        };
        match serde_saphyr::from_str::<Workflow>(&text) {
            Ok(workflow) => scan_workflow(&rel, &workflow, found),
            Err(e) => {
                let first_line = e.to_string().lines().next().unwrap_or("").to_string();
                found.skip(&rel, "", format!("not a readable workflow: {first_line}"));
            }
        }
    }
}

fn outward_word(text: &str) -> Option<&'static str> {
    let lower = text.to_ascii_lowercase();
    lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .find_map(|part| OUTWARD.iter().find(|w| part.starts_with(*w)).copied())
}

fn scan_workflow(file: &str, workflow: &Workflow, found: &mut Found) {
    for (job_id, job) in &workflow.jobs {
        let job_source = format!("{file} job {job_id}");
        let job_name = job.get("name").and_then(Value::as_str).unwrap_or("");
        if let Some(word) = outward_word(job_id).or_else(|| outward_word(job_name)) {
            found.skip(
                &job_source,
                "",
                format!("the job's name mentions `{word}`: not a check"),
            );
            continue;
        }
        if job.get("environment").is_some() {
            found.skip(&job_source, "", "the job targets a deployment environment");
            continue;
        }
        let Some(steps) = job.get("steps").and_then(Value::as_array) else {
            continue;
        };
        let defaults_run = job.get("defaults").and_then(|d| d.get("run"));
        let job_timeout = timeout_minutes(job.get("timeout-minutes"));
        let matrix = job.get("strategy").and_then(|s| s.get("matrix"));
        for (index, step) in steps.iter().enumerate() {
            let Some(run) = step.get("run").and_then(Value::as_str) else {
                continue;
            };
            let source = format!("{job_source} step {}", index + 1);
            let skip =
                |found: &mut Found, reason: String| found.skip(&source, run.trim_end(), reason);
            if step.get("continue-on-error").and_then(Value::as_bool) == Some(true) {
                skip(
                    found,
                    "CI lets this step fail (continue-on-error)".to_string(),
                );
                continue;
            }
            let step_name = step.get("name").and_then(Value::as_str).unwrap_or("");
            if let Some(word) = outward_word(step_name) {
                skip(
                    found,
                    format!("the step's name mentions `{word}`: not a check"),
                );
                continue;
            }
            let shell = step
                .get("shell")
                .or_else(|| defaults_run.and_then(|d| d.get("shell")))
                .and_then(Value::as_str);
            if let Some(shell) = shell {
                let program = shell.split_whitespace().next().unwrap_or(shell);
                if !POSIX_SHELLS.contains(&program) {
                    skip(found, format!("runs under `{shell}`; gates run under sh"));
                    continue;
                }
            }
            let script = match split_script(run) {
                Ok(s) => s,
                Err(reason) => {
                    skip(found, reason);
                    continue;
                }
            };
            for (line, text, reason) in &script.not_checks {
                found.skip(
                    format!("{source} line {line}"),
                    text.clone(),
                    format!("{reason}; a setup line, not a gate (the check lines are drafted)"),
                );
            }
            let workdir = step
                .get("working-directory")
                .or_else(|| defaults_run.and_then(|d| d.get("working-directory")))
                .and_then(Value::as_str);
            let timeout = timeout_minutes(step.get("timeout-minutes")).or(job_timeout);
            for check in script.checks {
                let source = match check.line {
                    Some(line) => format!("{source} line {line}"),
                    None => source.clone(),
                };
                let command = match workdir {
                    Some(dir) if !dir.trim().is_empty() && dir.trim() != "." => {
                        format!("cd {} && {}", shell_word(dir.trim()), check.command)
                    }
                    _ => check.command,
                };
                let skip = |found: &mut Found, reason: String| {
                    found.skip(&source, command.clone(), reason)
                };
                match expand(&command, matrix) {
                    Ok(expanded) => {
                        for (command, label) in expanded {
                            // Judge here too, so what is left out is listed in file order.
                            let verdict = classify::classify(&command);
                            if let CommandClass::Setup(r)
                            | CommandClass::Installs(r)
                            | CommandClass::Writes(r) = verdict
                            {
                                skip(found, r.to_string());
                                continue;
                            }
                            if let CommandClass::Refused(r) = verdict {
                                skip(found, r);
                                continue;
                            }
                            let (hint, source) = match &label {
                                Some(l) => (
                                    format!("{}-{}", hint_from_command(&command), l.values),
                                    format!("{source} (matrix {})", l.assignments),
                                ),
                                None => (hint_from_command(&command), source.clone()),
                            };
                            found.candidates.push(Candidate {
                                hint,
                                command,
                                timeout_sec: timeout,
                                source,
                                fallback: false,
                                tier: 0,
                            });
                        }
                    }
                    Err(reason) => skip(found, reason),
                }
            }
        }
    }
}

/// `timeout-minutes` as seconds, when it is a plain number.
fn timeout_minutes(value: Option<&Value>) -> Option<u32> {
    let minutes = value?.as_f64()?;
    if minutes <= 0.0 {
        return None;
    }
    let seconds = (minutes * 60.0).ceil();
    Some(if seconds > f64::from(u32::MAX) {
        u32::MAX
    } else {
        seconds as u32
    })
}

/// Quotes a directory for `cd` when it holds anything but safe path characters.
fn shell_word(word: &str) -> String {
    if word
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | '+' | '@' | ':'))
    {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// One line of a `run:` script that checks something, ready to be a gate on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CheckLine {
    /// The line, after the `cd`/`export` lines before it (`cd web && npm test`).
    command: String,
    /// 1-based among the script's non-blank, non-comment lines; `None` for a one-line script.
    line: Option<usize>,
}

/// What a `run:` script holds: its check lines, one gate each, and the lines that are not
/// checks with the reason (never dropped without a word).
#[derive(Debug, Default, PartialEq, Eq)]
struct Script {
    checks: Vec<CheckLine>,
    not_checks: Vec<(usize, String, String)>,
}

/// Splits a `run:` script into its lines: continuations joined, comments and blank lines
/// dropped. Each check line becomes its own gate, prefixed by the `cd`/`export` lines before
/// it. Lines are never joined with `&&`: `a` then `b || true` would become `a && b || true`,
/// which passes when `a` fails.
fn split_script(run: &str) -> Result<Script, String> {
    let joined = match Regex::new(r"[ \t]*\\\r?\n[ \t]*") {
        Ok(continuation) => continuation.replace_all(run, " ").into_owned(),
        Err(_) => run.to_string(),
    };
    let lines: Vec<&str> = joined
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    if lines.is_empty() {
        return Err("the step runs nothing".to_string());
    }
    if lines.len() == 1 {
        return Ok(Script {
            checks: vec![CheckLine {
                command: lines[0].to_string(),
                line: None,
            }],
            not_checks: Vec::new(),
        });
    }
    let control = [
        "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
        "function", "{", "}", "(", ")",
    ];
    for line in &lines {
        let first = line.split_whitespace().next().unwrap_or("");
        if control.contains(&first) || line.contains("<<") || line.ends_with('{') {
            return Err(
                "a multi-line script with shell control flow; move it into a script \
                        file and gate on that"
                    .to_string(),
            );
        }
        if matches!(first, "set" | "trap" | "shopt") {
            return Err(format!(
                "runs `{line}`, which changes how the lines after it behave; move the script into \
                 a file and gate on that"
            ));
        }
    }
    let mut script = Script::default();
    let mut context: Vec<&str> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        match classify::classify(line) {
            CommandClass::Refused(r) => return Err(format!("runs `{line}`: {r}")),
            CommandClass::Writes(r) => return Err(format!("runs `{line}`, which {r}")),
            CommandClass::Setup(reason) | CommandClass::Installs(reason) => {
                // `cd` and `export` shape the lines after them; other setup is listed.
                let first = shell::words(line)
                    .first()
                    .map(|w| shell::program(w).to_string());
                if matches!(first.as_deref(), Some("cd" | "export")) {
                    context.push(line);
                } else {
                    script
                        .not_checks
                        .push((i + 1, line.to_string(), reason.to_string()));
                }
            }
            CommandClass::Check(_) => {
                let mut parts = context.clone();
                parts.push(line);
                script.checks.push(CheckLine {
                    command: parts.join(" && "),
                    line: Some(i + 1),
                });
            }
        }
    }
    if script.checks.is_empty() {
        return Err("only prepares the environment".to_string());
    }
    Ok(script)
}

/// Names the values a matrix expansion substituted.
struct MatrixLabel {
    /// For the id: values joined with `-`.
    values: String,
    /// For the source: `name=value` pairs.
    assignments: String,
}

/// Substitutes `${{ matrix.x }}` and refuses any other expression.
fn expand(
    command: &str,
    matrix: Option<&Value>,
) -> Result<Vec<(String, Option<MatrixLabel>)>, String> {
    let (Ok(expr), Ok(matrix_ref)) = (
        Regex::new(r"\$\{\{\s*(.*?)\s*\}\}"),
        Regex::new(r"^matrix\.([A-Za-z0-9_-]+)$"),
    ) else {
        return Err("internal: expression pattern".to_string());
    };
    let mut vars: Vec<String> = Vec::new();
    for c in expr.captures_iter(command) {
        let inner = c.get(1).map_or("", |m| m.as_str());
        match matrix_ref.captures(inner).and_then(|m| m.get(1)) {
            Some(name) => {
                if !vars.iter().any(|v| v == name.as_str()) {
                    vars.push(name.as_str().to_string());
                }
            }
            None => {
                return Err(format!(
                    "uses `${{{{ {inner} }}}}`, which only GitHub Actions can evaluate"
                ));
            }
        }
    }
    if vars.is_empty() {
        return Ok(vec![(command.to_string(), None)]);
    }
    let Some(matrix) = matrix.and_then(Value::as_object) else {
        return Err(
            "uses `${{ matrix.… }}` but the job's matrix is computed at run time".to_string(),
        );
    };
    let mut axes: Vec<(String, Vec<String>)> = Vec::new();
    for var in &vars {
        let mut values: Vec<String> = Vec::new();
        let mut add = |v: &Value| {
            if let Some(s) = scalar(v)
                && !values.contains(&s)
            {
                values.push(s);
            }
        };
        match matrix.get(var) {
            Some(Value::Array(list)) => list.iter().for_each(&mut add),
            Some(other) if scalar(other).is_none() => {
                return Err(format!("matrix.{var} is computed at run time"));
            }
            Some(other) => add(other),
            None => {}
        }
        if let Some(includes) = matrix.get("include").and_then(Value::as_array) {
            for include in includes {
                if let Some(v) = include.get(var) {
                    add(v);
                }
            }
        }
        if values.is_empty() {
            return Err(format!(
                "uses matrix.{var}, which the job's matrix does not list"
            ));
        }
        axes.push((var.clone(), values));
    }
    let total: usize = axes.iter().map(|(_, v)| v.len()).product();
    if total > MAX_EXPANSION {
        return Err(format!(
            "its matrix gives {total} variants of the command (more than {MAX_EXPANSION}); \
             pick the ones worth gating by hand"
        ));
    }
    let mut combos: Vec<Vec<(String, String)>> = vec![Vec::new()];
    for (var, values) in &axes {
        combos = combos
            .into_iter()
            .flat_map(|combo| {
                values.iter().map(move |v| {
                    let mut c = combo.clone();
                    c.push((var.clone(), v.clone()));
                    c
                })
            })
            .collect();
    }
    let mut out: Vec<(String, Option<MatrixLabel>)> = Vec::new();
    for combo in combos {
        let substituted = expr
            .replace_all(command, |c: &regex::Captures<'_>| {
                let inner = c.get(1).map_or("", |m| m.as_str());
                let var = inner.strip_prefix("matrix.").unwrap_or(inner);
                combo
                    .iter()
                    .find(|(name, _)| name == var)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default()
            })
            .into_owned();
        let label = MatrixLabel {
            values: combo
                .iter()
                .map(|(_, v)| v.as_str())
                .collect::<Vec<_>>()
                .join("-"),
            assignments: combo
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" "),
        };
        out.push((substituted, Some(label)));
    }
    Ok(out)
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_line_steps_become_one_gate_per_check_line_with_their_context() {
        let run = "# lint first\ncd web\nnpm ci\nnpm run lint\nnpm test -- \\\n  --coverage\n";
        let script = split_script(run).unwrap();
        let commands: Vec<&str> = script.checks.iter().map(|c| c.command.as_str()).collect();
        assert_eq!(
            commands,
            ["cd web && npm run lint", "cd web && npm test -- --coverage"]
        );
        assert_eq!(
            script.not_checks,
            vec![(2, "npm ci".to_string(), "installs dependencies".to_string())]
        );
        assert!(split_script("if true; then\n  cargo test\nfi\n").is_err());
        assert!(split_script("npm ci\nnpm run build\nnpm publish\n").is_err());
        assert!(split_script("pip install -r req.txt\necho done\n").is_err());
        assert!(split_script("set +e\ncargo test\n").is_err());
    }

    /// `pytest` then `mypy src || true` joined with `&&` read `pytest && mypy src || true`,
    /// which passes when pytest fails.
    #[test]
    fn a_line_with_or_true_is_never_joined_to_the_line_before_it() {
        let script = split_script("pytest\nmypy src || true\n").unwrap();
        let commands: Vec<&str> = script.checks.iter().map(|c| c.command.as_str()).collect();
        assert_eq!(commands, ["pytest", "mypy src || true"]);
    }

    #[test]
    fn matrix_values_the_command_uses_expand_others_collapse() {
        let matrix: Value = serde_json::json!({
            "os": ["ubuntu-latest", "macos-latest"],
            "features": ["default", "full"],
            "include": [{"features": "minimal", "os": "ubuntu-latest"}]
        });
        let out = expand(
            "cargo test --features ${{ matrix.features }}",
            Some(&matrix),
        )
        .unwrap_or_default();
        let commands: Vec<&str> = out.iter().map(|(c, _)| c.as_str()).collect();
        assert_eq!(
            commands,
            [
                "cargo test --features default",
                "cargo test --features full",
                "cargo test --features minimal"
            ]
        );
        assert!(expand("deploy ${{ secrets.X }}", Some(&matrix)).is_err());
        assert!(expand("x ${{ matrix.nope }}", Some(&matrix)).is_err());
        let computed = Value::String("${{ fromJSON(needs.a.outputs.m) }}".to_string());
        assert!(expand("x ${{ matrix.a }}", Some(&computed)).is_err());
    }
}
