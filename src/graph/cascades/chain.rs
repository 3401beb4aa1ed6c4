//! The `//@screen_name:` markers of a repost's text: Weibo's record of the hops between a
//! repost and the root post it names.
//!
//! When C reposts B's repost, Weibo writes C's words, then `//@B:`, then B's whole text
//! (its own words and markers), and names the root, not B's repost, as what C reposted. So
//! the *first* marker names the nearest hop. A marker is `//@`, a name of 1 to 30
//! characters without spaces, `@`, `/` or colons, then an ASCII or full-width colon.

/// The most characters a screen name has on Weibo.
const MAX_NAME_CHARS: usize = 30;

/// The screen name of the first well-formed marker of `text`, if any.
pub fn first_marker(text: &str) -> Option<&str> {
    let mut rest = text;
    while let Some(at) = rest.find("//@") {
        let after = &rest[at + 3..];
        if let Some(name) = name_before_colon(after) {
            return Some(name);
        }
        rest = after;
    }
    None
}

/// The name at the start of `s` when a colon ends it soon enough.
fn name_before_colon(s: &str) -> Option<&str> {
    for (chars, (i, c)) in s.char_indices().enumerate() {
        match c {
            ':' | '：' if chars > 0 => return Some(&s[..i]),
            ':' | '：' | '@' | '/' => return None,
            c if c.is_whitespace() => return None,
            _ if chars >= MAX_NAME_CHARS => return None,
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_first_marker_is_the_nearest_hop() {
        assert_eq!(
            first_marker("好//@carol:哈哈//@bob:转发微博"),
            Some("carol")
        );
        assert_eq!(first_marker("//@何炅：转发"), Some("何炅"));
        assert_eq!(first_marker("转发微博"), None);
        // Not markers: no name, no colon, a space in the name, a URL.
        assert_eq!(first_marker("//@:x"), None);
        assert_eq!(first_marker("//@bob"), None);
        assert_eq!(first_marker("//@bob smith: x"), None);
        assert_eq!(first_marker("见 https://weibo.com//@x"), None);
        // A malformed marker is passed over for the next one.
        assert_eq!(first_marker("//@ x//@dave:y"), Some("dave"));
        let long = "很".repeat(31);
        assert_eq!(first_marker(&format!("//@{long}:x")), None);
        let thirty = "很".repeat(30);
        assert_eq!(
            first_marker(&format!("//@{thirty}:x")),
            Some(thirty.as_str())
        );
    }

    proptest! {
        /// Whatever the words around them, a chain written the way Weibo writes it gives
        /// back its first name.
        #[test]
        fn a_written_chain_gives_its_first_name(
            names in proptest::collection::vec("[a-z用户0-9_-]{1,12}", 1..5),
            words in "[^/@:：]{0,20}",
        ) {
            let mut text = String::new();
            for (i, name) in names.iter().enumerate() {
                if i == 0 {
                    text.push_str(&words);
                }
                text.push_str(&format!("//@{name}:转发"));
            }
            prop_assert_eq!(first_marker(&text), Some(names[0].as_str()));
        }

        #[test]
        fn never_panics(text in ".{0,80}") {
            let _ = first_marker(&text);
        }
    }
}
