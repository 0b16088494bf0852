//! Failures of the machine rather than of the agent: what no retry of the agent can fix.
//!
//! The rule: a dispatch whose own preparation failed (the prompt file, a scratch directory:
//! greenlight's work on this machine, before any agent process exists) is the machine's, whatever
//! the error; a spawn that failed is the machine's only when the kernel ran out of something
//! (space, file descriptors, memory, processes) or cannot write at all. A spawn that fails
//! because the executable is missing or not executable is the agent's setup, and stays
//! `dispatch-dead` (the start-of-goal check catches it first).

use rustix::io::Errno;

/// Whether `errno` (an `io::Error`'s raw OS error) says the machine ran out of something or
/// cannot write: ENOSPC, EDQUOT, EMFILE, ENFILE, ENOMEM, EAGAIN (no process slot), EROFS.
pub fn is_machine_errno(errno: i32) -> bool {
    [
        Errno::NOSPC,
        Errno::DQUOT,
        Errno::MFILE,
        Errno::NFILE,
        Errno::NOMEM,
        Errno::AGAIN,
        Errno::ROFS,
    ]
    .contains(&Errno::from_raw_os_error(errno))
}

/// What to tell a person about a machine failure: the error, and the way out.
pub fn advice(detail: &str) -> String {
    format!(
        "{detail}; this is the machine, not the agent (free space or file descriptors, or point \
         TMPDIR at a usable directory), so no turn was charged"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_out_of_something_is_the_machine_and_a_missing_program_is_not() {
        for errno in [
            Errno::NOSPC,
            Errno::DQUOT,
            Errno::MFILE,
            Errno::NFILE,
            Errno::NOMEM,
            Errno::AGAIN,
            Errno::ROFS,
        ] {
            assert!(is_machine_errno(errno.raw_os_error()), "{errno:?}");
        }
        for errno in [
            Errno::NOENT,
            Errno::ACCESS,
            Errno::NOEXEC,
            Errno::PERM,
            Errno::ISDIR,
        ] {
            assert!(!is_machine_errno(errno.raw_os_error()), "{errno:?}");
        }
        // What `std::io::Error` reports for a full disk.
        let full = std::io::Error::from_raw_os_error(28);
        assert!(is_machine_errno(full.raw_os_error().unwrap_or(0)));
    }
}
