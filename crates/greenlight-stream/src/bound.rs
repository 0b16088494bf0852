//! Size bounds for frame text, so one chatty agent or gate cannot make a frame (or a page of the
//! dashboard) huge.

/// Activity, reply and judge text per frame. A coalesced text frame carries at most this much.
pub const MAX_TEXT_BYTES: usize = 16 * 1024;
/// Gate output per frame.
pub const MAX_GATE_OUTPUT_BYTES: usize = 8 * 1024;
/// A turn's prompt (it carries the last evidence, itself bounded by the digest).
pub const MAX_PROMPT_BYTES: usize = 64 * 1024;

/// `text` cut to at most `max` bytes at a character boundary; `true` when something was cut.
pub fn bounded(text: &str, max: usize) -> (String, bool) {
    if text.len() <= max {
        return (text.to_owned(), false);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (text[..end].to_owned(), true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_at_a_character_boundary() {
        // "é" is two bytes: a cut at 3 would split the second one.
        assert_eq!(bounded("éé", 3), ("é".to_owned(), true));
        assert_eq!(bounded("éé", 4), ("éé".to_owned(), false));
        assert_eq!(bounded("", 0), (String::new(), false));
    }
}
