//! The `options:` a drafted verify.yaml needs to judge where it is drafted: a `baseRef` that
//! resolves, and `skipInPrimaryCheckout: false` in a primary checkout.
//!
//! The one rule: every option written carries a comment saying what was found and why the
//! value was chosen, so a reviewer can change it knowingly. Nothing is written outside git.

use std::path::Path;

/// What the repository at hand needs in `options:`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DraftOptions {
    /// `baseRef` to write, with the comment lines that explain it.
    pub base_ref: Option<(String, Vec<String>)>,
    /// `skipInPrimaryCheckout` to write, with the comment lines that explain it.
    pub skip_in_primary_checkout: Option<(bool, Vec<String>)>,
    /// Comment lines for the options block when nothing resolves (no git, no commit).
    pub notes: Vec<String>,
}

impl DraftOptions {
    /// True when there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.base_ref.is_none() && self.skip_in_primary_checkout.is_none() && self.notes.is_empty()
    }
}

/// Looks at the git repository containing `root` and chooses the options.
pub fn options_for(root: &Path) -> DraftOptions {
    let git = |args: &[&str]| greenlight_proc::git::line(root, args);
    let mut options = DraftOptions::default();
    if git(&["rev-parse", "--is-inside-work-tree"]).as_deref() != Some("true") {
        return options;
    }
    let has = |r: &str| {
        git(&[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{r}^{{commit}}"),
        ])
    };
    if has("HEAD").is_none() {
        options.notes = vec![
            "This repository has no commit yet, so there is no base to count work from: commit"
                .to_owned(),
            "once, then set options.baseRef to the branch your work merges into.".to_owned(),
        ];
        return options;
    }
    let current = git(&["symbolic-ref", "--quiet", "--short", "HEAD"]);
    if let Some(target) = git(&[
        "symbolic-ref",
        "--quiet",
        "--short",
        "refs/remotes/origin/HEAD",
    ]) && has(&target).is_some()
    {
        options.base_ref = Some((
            target.clone(),
            vec![format!(
                "baseRef: origin/HEAD points at {target}; work-evidence counts the commits and \
                 changes since HEAD left it."
            )],
        ));
    } else {
        let configured = git(&["config", "--get", "init.defaultBranch"]);
        let candidates = ["origin/main", "origin/master"]
            .into_iter()
            .map(str::to_owned)
            .chain(configured)
            .chain(["main".to_owned(), "master".to_owned()])
            .chain(current.clone());
        let mut seen = Vec::new();
        for candidate in candidates {
            if seen.contains(&candidate) {
                continue;
            }
            seen.push(candidate.clone());
            if has(&candidate).is_some() {
                let mut why = vec![format!(
                    "baseRef: origin/HEAD is not set here (no remote, or a clone without it), so \
                     work is counted from {candidate}, the default branch found."
                )];
                if current.as_deref() == Some(candidate.as_str()) {
                    why.push(format!(
                        "On {candidate} itself only uncommitted changes count as work; commit on a \
                         branch or in a linked worktree (git worktree add) for commits to count."
                    ));
                }
                why.push("Set it to the branch your work merges into.".to_owned());
                options.base_ref = Some((candidate, why));
                break;
            }
        }
    }
    let git_dir = git(&["rev-parse", "--absolute-git-dir"]);
    let common = git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]);
    let canonical = |p: Option<String>| p.and_then(|p| std::fs::canonicalize(p).ok());
    let (git_dir, common) = (canonical(git_dir), canonical(common));
    if git_dir.is_some() && git_dir == common {
        options.skip_in_primary_checkout = Some((
            false,
            vec![
                "skipInPrimaryCheckout: false, because this was drafted in the primary checkout \
                 (not a linked worktree)."
                    .to_owned(),
                "With true (the default) every gate is skipped here, since a primary checkout is \
                 often where a live server runs;"
                    .to_owned(),
                "set it to true if gates should run only in linked worktrees (git worktree add)."
                    .to_owned(),
            ],
        ));
    }
    options
}
