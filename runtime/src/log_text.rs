//! Text from guests and clients as wedge's log shows it: cut to a length while it is
//! formatted, and escaped. What a guest chose (an error code's message, a name) can be
//! as long as its host-call budget (16 MiB by default), and formatted whole — `Debug`
//! escapes a control character in up to 6 octets — it cost wedge several times that
//! in memory and CPU before anything could cut it; unescaped, a guest or a client
//! could forge a line of wedge's.

use std::borrow::Cow;
use std::fmt::{self, Write};

/// How much of an error's text a line of wedge's shows.
pub(crate) const ERROR_TEXT: usize = 1024;

/// How much of a request target an access log line shows.
pub(crate) const REQUEST_TARGET: usize = 4096;

/// `args` formatted into at most `max` octets, then escaped ([`printable`]): how a
/// line of wedge's shows what a guest or a client chose.
pub(crate) fn shown(args: fmt::Arguments<'_>, max: usize) -> String {
    printable(&bounded(args, max)).into_owned()
}

/// `value` as [`shown`] makes it, formatted only when the line is written: a line
/// at a level that is off costs nothing.
pub(crate) struct Shown<'a, T: fmt::Display>(pub &'a T, pub usize);

impl<T: fmt::Display> fmt::Display for Shown<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&shown(format_args!("{}", self.0), self.1))
    }
}

/// Text as it may appear in the log: control characters (all but tab), line and
/// paragraph separators and bidirectional controls written as `\u{…}`, so that it can
/// neither forge a line of wedge's nor make a terminal show something else.
pub(crate) fn printable(text: &str) -> Cow<'_, str> {
    let hidden = |c: char| {
        (c.is_control() && c != '\t')
            || matches!(
                c,
                '\u{2028}' | '\u{2029}' | '\u{200e}' | '\u{200f}' | '\u{061c}'
            )
            || ('\u{202a}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)
    };
    if !text.contains(hidden) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if hidden(c) {
            let _ = write!(shown, "\\u{{{:x}}}", c as u32);
        } else {
            shown.push(c);
        }
    }
    Cow::Owned(shown)
}

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
        if self.cut {
            // A formatter that went on after the cut: nothing more is taken.
            return Err(fmt::Error);
        }
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
    fn controls_separators_and_bidi_overrides_are_shown_escaped() {
        assert!(matches!(printable("plain\ttext é"), Cow::Borrowed(_)));
        let forged = "ok\rINFO wedge: token accepted\u{1b}[2K\u{0}\u{85}\u{2028}\u{202e}x";
        assert_eq!(
            printable(forged),
            "ok\\u{d}INFO wedge: token accepted\\u{1b}[2K\\u{0}\\u{85}\\u{2028}\\u{202e}x"
        );
    }

    #[test]
    fn shown_text_is_cut_then_escaped() {
        assert_eq!(shown(format_args!("a\u{2028}bcdef"), 6), "a\\u{2028}bc…");
    }

    /// A line at a level that is off never formats its value; one that is on shows
    /// it cut and escaped.
    #[test]
    fn a_shown_value_is_formatted_only_when_its_line_is_written() {
        struct Counted<'a>(&'a std::cell::Cell<usize>);
        impl fmt::Display for Counted<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.set(self.0.get() + 1);
                f.write_str("a\nb")
            }
        }
        let formatted = std::cell::Cell::new(0);
        let value = Counted(&formatted);
        let info_only = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_writer(std::io::sink)
            .finish();
        tracing::subscriber::with_default(info_only, || {
            tracing::debug!("off: {}", Shown(&value, 10));
        });
        assert_eq!(formatted.get(), 0);
        assert_eq!(Shown(&value, 10).to_string(), "a\\u{a}b");
        assert_eq!(formatted.get(), 1);
    }

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
