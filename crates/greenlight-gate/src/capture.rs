//! What a gate's output feeds besides its tail: the first bytes (for head-and-tail evidence)
//! and a streaming digester, both bounded whatever the gate prints.

use std::path::Path;

use greenlight_digest::matchers::MatcherSet;
use greenlight_digest::{Digest, DigestOptions, StreamingDigester};

use crate::exec::OutputSink;

/// How much of a gate's output is digested. A run whose failures sit past 64 MiB of output gets
/// a `partial` digest (scan budget) and its raw tail instead; scanning further would cost a
/// second per 100 MB of output for a digest that could no longer be complete anyway.
pub const GATE_SCAN_BYTES: u64 = 64 << 20;

/// Keeps the head of the output and digests all of it as it streams.
pub struct Capture {
    head: Vec<u8>,
    head_limit: usize,
    digester: StreamingDigester,
}

impl Capture {
    /// Keeps up to `head_limit` leading bytes of the output of the gate `command` (its
    /// command line tells the digest whether the output holds one run or several) run in
    /// `root` (the digest gives the paths under it relative to it; `None`: a directory not on
    /// this machine, whose paths are kept as printed).
    pub fn new(head_limit: usize, command: &str, root: Option<&Path>) -> Self {
        Self::with_matchers(head_limit, &MatcherSet::default(), command, root)
    }

    /// As [`Capture::new`], with the gate's problem matchers read before the raw tail.
    pub fn with_matchers(
        head_limit: usize,
        matchers: &MatcherSet,
        command: &str,
        root: Option<&Path>,
    ) -> Self {
        let options = DigestOptions {
            max_scan_bytes: GATE_SCAN_BYTES,
            matchers: matchers.clone(),
            command: Some(command.to_owned()),
            // A directory whose name is not UTF-8 names no path the digest could read either.
            root: root.and_then(Path::to_str).map(str::to_owned),
            ..DigestOptions::default()
        };
        Self {
            head: Vec::new(),
            head_limit,
            digester: StreamingDigester::new(options),
        }
    }

    /// The leading bytes seen.
    pub fn head(&self) -> &[u8] {
        &self.head
    }

    /// Ends the stream: the digest of everything seen, judged against the exit code (`None`
    /// when the gate was killed, so it can never read as a clean run).
    pub fn finish(self, exit_code: Option<i32>) -> (Vec<u8>, Digest) {
        (self.head, self.digester.finish(exit_code))
    }
}

impl OutputSink for Capture {
    fn chunk(&mut self, bytes: &[u8]) {
        let room = self.head_limit.saturating_sub(self.head.len());
        self.head.extend_from_slice(&bytes[..bytes.len().min(room)]);
        self.digester.push(bytes);
    }
}
