//! `package.json` scripts (root, then the packages of a pnpm or npm workspace).
//!
//! The one rule: a script is run through the repository's own package manager, the way its
//! developers run it (`pnpm run lint`), never by copying the script's body.

use std::path::{Path, PathBuf};

use super::classify::{self, CommandClass};
use super::keys::{Context, PackageManager};
use super::make::task_is_check;
use super::{Candidate, Found};

/// The body npm writes into a fresh package.json's `test` script; it always fails.
const NPM_PLACEHOLDER: &str = "no test specified";

/// Proposes check-like scripts of the root package.json, then workspace-wide scripts.
pub(crate) fn scan(root: &Path, ctx: &Context, found: &mut Found) {
    if let Some(reason) = &ctx.package_json_error {
        found.skip("package.json", "", reason.clone());
        return;
    }
    let (Some(scripts), Some(pm)) = (&ctx.scripts, ctx.package_manager) else {
        return;
    };
    for (name, body) in scripts {
        if !script_is_check(name, scripts) {
            continue;
        }
        let source = format!("package.json script \"{name}\"");
        let command = format!("{} run {name}", pm.name());
        if let Some(reason) = unusable_body(body) {
            found.skip(source, command, reason);
            continue;
        }
        found.candidates.push(Candidate {
            hint: name.clone(),
            command,
            timeout_sec: None,
            source,
            fallback: false,
            tier: 1,
        });
    }
    scan_workspaces(root, ctx, pm, scripts, found);
}

/// Scripts defined in workspace packages but not at the root run across the workspace.
fn scan_workspaces(
    root: &Path,
    ctx: &Context,
    pm: PackageManager,
    root_scripts: &[(String, String)],
    found: &mut Found,
) {
    let patterns = workspace_patterns(root, ctx, pm);
    if patterns.is_empty() {
        return;
    }
    // Each script name with the packages that define it.
    let mut names: Vec<(String, Vec<String>)> = Vec::new();
    for dir in expand_patterns(root, &patterns) {
        let Ok(Some(text)) = super::read_source(&dir.join("package.json")) else {
            continue;
        };
        let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        let Some(scripts) = value.get("scripts").and_then(|s| s.as_object()) else {
            continue;
        };
        let list: Vec<(String, String)> = scripts
            .iter()
            .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
            .collect();
        for (name, body) in &list {
            if !script_is_check(name, &list) || unusable_body(body).is_some() {
                continue;
            }
            let package = dir
                .strip_prefix(root)
                .unwrap_or(&dir)
                .to_string_lossy()
                .into_owned();
            match names.iter_mut().find(|(n, _)| n == name) {
                Some((_, packages)) => packages.push(package),
                None => names.push((name.clone(), vec![package])),
            }
        }
    }
    let manager = pm.name();
    let has_ci = super::workflow::exists(root);
    for (name, packages) in names {
        if root_scripts.iter().any(|(n, _)| *n == name) {
            continue;
        }
        let count = packages.len();
        // One package's own script is that package's business; where CI exists and does not
        // run it, the project does not gate on it either.
        if count == 1 && has_ci {
            found.skip(
                format!(
                    "{manager} workspace: package {} script \"{name}\"",
                    packages[0]
                ),
                "",
                "only this package defines it and CI never runs it",
            );
            continue;
        }
        let command = match pm {
            PackageManager::Pnpm => format!("pnpm -r --if-present run {name}"),
            PackageManager::Npm => format!("npm run {name} --workspaces --if-present"),
            // yarn and bun have no portable "run in every workspace" form across versions.
            PackageManager::Yarn | PackageManager::Bun => continue,
        };
        let packages = if count == 1 {
            "1 package defines".to_string()
        } else {
            format!("{count} packages define")
        };
        found.candidates.push(Candidate {
            hint: name.clone(),
            command,
            timeout_sec: None,
            source: format!("{manager} workspace: {packages} script \"{name}\""),
            fallback: false,
            tier: 1,
        });
    }
}

/// True for a script that checks: by name, and not a pre/post hook of another script.
fn script_is_check(name: &str, scripts: &[(String, String)]) -> bool {
    for hook in ["pre", "post"] {
        if let Some(base) = name.strip_prefix(hook)
            && scripts.iter().any(|(n, _)| n == base)
        {
            return false;
        }
    }
    task_is_check(name)
}

/// Why a script body cannot be a gate, if it cannot.
fn unusable_body(body: &str) -> Option<String> {
    if body.contains(NPM_PLACEHOLDER) {
        return Some("npm's placeholder test script, which always fails".to_string());
    }
    if classify::never_ends(body) {
        return Some("runs in watch or server mode and never ends".to_string());
    }
    match classify::classify(body) {
        CommandClass::Refused(r) => Some(format!("the script runs `{body}`: {r}")),
        CommandClass::Writes(r) => Some(format!("the script {r}")),
        CommandClass::Installs(r) => Some(format!("the script runs `{body}`, which {r}")),
        _ => None,
    }
}

/// Workspace package globs: `pnpm-workspace.yaml` `packages:`, else package.json `workspaces`.
fn workspace_patterns(root: &Path, ctx: &Context, pm: PackageManager) -> Vec<String> {
    if pm == PackageManager::Pnpm
        && let Ok(Some(text)) = super::read_source(&root.join("pnpm-workspace.yaml"))
    {
        #[derive(serde::Deserialize)]
        struct PnpmWorkspace {
            #[serde(default)]
            packages: Vec<String>,
        }
        if let Ok(ws) = serde_saphyr::from_str::<PnpmWorkspace>(&text) {
            return ws.packages;
        }
    }
    let Some(value) = &ctx.package_json else {
        return Vec::new();
    };
    let list = match value.get("workspaces") {
        Some(serde_json::Value::Array(a)) => a.clone(),
        Some(serde_json::Value::Object(o)) => o
            .get("packages")
            .and_then(|p| p.as_array())
            .cloned()
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    list.iter()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

/// Directories matched by workspace globs of the forms `dir`, `dir/*` and `dir/**`.
fn expand_patterns(root: &Path, patterns: &[String]) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for pattern in patterns.iter().filter(|p| !p.starts_with('!')) {
        let pattern = pattern.trim_start_matches("./");
        if let Some(parent) = pattern
            .strip_suffix("/**")
            .or_else(|| pattern.strip_suffix("/*"))
        {
            let Ok(entries) = std::fs::read_dir(root.join(parent)) else {
                continue;
            };
            let mut children: Vec<PathBuf> = entries
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect();
            children.sort();
            dirs.extend(children);
        } else if !pattern.contains('*') {
            dirs.push(root.join(pattern));
        }
    }
    dirs
}
