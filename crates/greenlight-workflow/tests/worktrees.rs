//! A run's worktrees made and removed at once, in a real git repository: parallel `git worktree
//! add` and `git worktree remove` on one repository must leave it exactly as the same calls one
//! after another would (every worktree registered and on its own branch at the commit asked
//! for, nothing half-made, `git fsck` clean), and removing them leaves no worktree or branch.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use greenlight_testkit::TempRepo;
use greenlight_workflow::run::worktrees::{Tree, Worktrees};

#[test]
fn worktrees_made_and_removed_at_once_leave_the_repository_whole() {
    let repo = TempRepo::primary();
    let base = repo.git(&["rev-parse", "HEAD"]);
    // A few rounds: a race between git's own locks would show as one failing add, a missing
    // registration or a branch at the wrong commit in some round.
    for round in 1..=5 {
        let trees = Worktrees::new(repo.path(), &round.to_string()).unwrap();
        let members: Vec<Tree> = (1..=12u64)
            .map(|i| trees.tree(Some("fan"), Some(&format!("m{i}")), i))
            .collect();
        let made = trees.ensure_all(&members, &base);
        assert!(
            made.iter().all(|m| matches!(m, Ok(true))),
            "round {round}: {made:?}"
        );
        let listed = repo.git(&["worktree", "list", "--porcelain"]);
        for tree in &members {
            let path = tree.path.display().to_string();
            assert!(
                listed.contains(&format!("worktree {path}\n")),
                "{path} in {listed}"
            );
            assert_eq!(trees.head(tree).unwrap(), base, "{}", tree.branch);
            assert!(tree.path.join("README").exists(), "{path} is checked out");
            let status = repo.git(&["-C", &path, "status", "--porcelain"]);
            assert_eq!(status, "", "{path} is clean");
        }
        // Made already: kept, not made again.
        assert!(
            trees
                .ensure_all(&members, &base)
                .iter()
                .all(|m| matches!(m, Ok(false)))
        );
        repo.git(&["fsck", "--no-progress"]);

        trees.remove_all(&members).unwrap();
        assert_eq!(
            repo.git(&["worktree", "list"]).lines().count(),
            1,
            "round {round}"
        );
        let branches = repo.git(&[
            "for-each-ref",
            "--format=%(refname)",
            "refs/heads/greenlight/",
        ]);
        assert_eq!(
            branches, "",
            "round {round}: the members' branches are gone"
        );
        assert!(members.iter().all(|t| !t.path.exists()));
        // Removing what is gone already is no error.
        trees.remove_all(&members).unwrap();
        trees.tidy();
        repo.git(&["fsck", "--no-progress"]);
    }
}
