//! The bounded tail of a child's output: the last N bytes, whatever the child prints.
//!
//! Memory is fixed at construction; decoding happens once, at the end, on a UTF-8 boundary and
//! with replacement, so a stray byte can never empty the tail.

use std::collections::VecDeque;

/// Keeps the last `capacity` bytes pushed into it and counts everything it saw.
#[derive(Debug, Clone)]
pub struct TailBuffer {
    capacity: usize,
    bytes: VecDeque<u8>,
    total: u64,
}

impl TailBuffer {
    /// A buffer that keeps at most `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            bytes: VecDeque::with_capacity(capacity.min(64 * 1024)),
            total: 0,
        }
    }

    /// Appends a chunk, dropping the oldest bytes beyond the capacity.
    pub fn push(&mut self, chunk: &[u8]) {
        self.total += chunk.len() as u64;
        if self.capacity == 0 {
            return;
        }
        let keep = &chunk[chunk.len().saturating_sub(self.capacity)..];
        let overflow = (self.bytes.len() + keep.len()).saturating_sub(self.capacity);
        self.bytes.drain(..overflow);
        self.bytes.extend(keep);
    }

    /// How many bytes were pushed in all.
    pub fn total_bytes(&self) -> u64 {
        self.total
    }

    /// Whether older bytes were dropped.
    pub fn truncated(&self) -> bool {
        self.total > self.bytes.len() as u64
    }

    /// The kept bytes, raw.
    pub fn bytes(&self) -> Vec<u8> {
        let (front, back) = self.bytes.as_slices();
        let mut raw = Vec::with_capacity(self.bytes.len());
        raw.extend_from_slice(front);
        raw.extend_from_slice(back);
        raw
    }

    /// The kept bytes as text. When the buffer was cut, a partial character at the cut is
    /// skipped so the tail starts on a character boundary; any other invalid byte becomes U+FFFD.
    pub fn text(&self) -> String {
        let raw = self.bytes();
        let mut start = 0;
        if self.truncated() {
            // At most three continuation bytes can precede the first whole character.
            while start < raw.len().min(3) && (raw[start] & 0b1100_0000) == 0b1000_0000 {
                start += 1;
            }
        }
        String::from_utf8_lossy(&raw[start..]).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn keeps_only_the_last_bytes() {
        let mut tail = TailBuffer::new(4);
        tail.push(b"abc");
        tail.push(b"defg");
        assert_eq!(tail.text(), "defg");
        assert_eq!(tail.total_bytes(), 7);
        assert!(tail.truncated());
    }

    #[test]
    fn a_cut_inside_a_character_starts_at_the_next_one() {
        let mut tail = TailBuffer::new(4);
        tail.push("xé€".as_bytes()); // 1 + 2 + 3 bytes: the last 4 start inside é
        assert_eq!(tail.text(), "€");
    }

    #[test]
    fn invalid_bytes_become_replacement_characters_not_an_empty_tail() {
        let mut tail = TailBuffer::new(16);
        tail.push(b"ok \xff\xfe\x00 end");
        assert_eq!(tail.text(), "ok \u{fffd}\u{fffd}\u{0} end");
    }

    #[test]
    fn zero_capacity_counts_but_keeps_nothing() {
        let mut tail = TailBuffer::new(0);
        tail.push(b"hello");
        assert_eq!(tail.text(), "");
        assert_eq!(tail.total_bytes(), 5);
    }

    proptest! {
        #[test]
        fn chunking_never_changes_the_tail(data in proptest::collection::vec(any::<u8>(), 0..300),
                                           cap in 0usize..64, cut in 1usize..17) {
            let mut whole = TailBuffer::new(cap);
            whole.push(&data);
            let mut pieces = TailBuffer::new(cap);
            for chunk in data.chunks(cut) { pieces.push(chunk); }
            prop_assert_eq!(whole.text(), pieces.text());
            let start = data.len().saturating_sub(cap);
            prop_assert!(whole.text().len() <= cap * 3);
            prop_assert_eq!(whole.bytes.iter().copied().collect::<Vec<_>>(), data[start..].to_vec());
        }
    }
}
