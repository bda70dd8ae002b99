//! Text formatted with a cap on its length, enforced while it is formatted: what a
//! guest chose (an error code's message, a name) can be as long as its host-call
//! budget (16 MiB by default), and formatted whole — `Debug` escapes a control
//! character in up to 6 octets — it cost wedge several times that in memory and
//! CPU before anything could cut it.

use std::fmt::{self, Write};

/// Formats `args` into at most `max` octets (cut at a character boundary), with
/// `…` after the cut.
pub(crate) fn bounded(args: fmt::Arguments<'_>, max: usize) -> String {
    let mut text = Bounded {
        text: String::new(),
        max,
        cut: false,
    };
    // An error here is the cut, which stops the formatting.
    let _ = text.write_fmt(args);
    if text.cut {
        text.text.push('…');
    }
    text.text
}

struct Bounded {
    text: String,
    max: usize,
    cut: bool,
}

impl Write for Bounded {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.max - self.text.len();
        if s.len() <= room {
            self.text.push_str(s);
            return Ok(());
        }
        let end = s.floor_char_boundary(room);
        self.text.push_str(&s[..end]);
        self.cut = true;
        Err(fmt::Error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_whole() {
        assert_eq!(bounded(format_args!("a {} c", "b"), 5), "a b c");
    }

    #[test]
    fn long_text_is_cut_at_a_character_boundary_and_marked() {
        assert_eq!(bounded(format_args!("ab{}", "€€"), 4), "ab…");
        assert_eq!(bounded(format_args!("abcdef"), 3), "abc…");
    }

    /// The cut stops the formatting: a `Debug` of a huge value is not made whole
    /// first (the pieces written past the cap are never asked for).
    #[test]
    fn formatting_stops_at_the_cut() {
        struct Pieces<'a>(&'a std::cell::Cell<usize>);
        impl fmt::Debug for Pieces<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                for _ in 0..1_000_000 {
                    self.0.set(self.0.get() + 1);
                    f.write_str("xxxx")?;
                }
                Ok(())
            }
        }
        let asked = std::cell::Cell::new(0);
        let text = bounded(format_args!("{:?}", Pieces(&asked)), 10);
        assert_eq!(text, "xxxxxxxxxx…");
        assert_eq!(asked.get(), 3);
    }
}
