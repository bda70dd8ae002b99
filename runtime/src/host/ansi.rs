//! The ANSI escapes cargo and rustc colour their messages with (`--color=always`,
//! `--message-format=json-diagnostic-rendered-ansi`): dropped for plain text, turned
//! into HTML spans of the same colours for the build error page.
//!
//! Only SGR sequences (`ESC [ params m`) carry meaning here: bold, dim, italic,
//! underline, and the 16-colour, 256-colour and RGB foregrounds and backgrounds.
//! Every other CSI sequence (cursor moves, line clears) is dropped.

use std::fmt::Write as _;

/// One piece of the text: a run of characters, or an escape sequence's parameters
/// and final byte.
enum Piece<'a> {
    Text(&'a str),
    Escape { params: &'a str, last: char },
}

/// Splits `text` into runs and CSI sequences (`ESC [`, parameters, a final byte in
/// `@`..=`~`). A lone ESC, or one not followed by `[`, is dropped with the next char.
fn pieces(text: &str) -> impl Iterator<Item = Piece<'_>> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let Some(esc) = rest.strip_prefix('\x1b') else {
            let end = rest.find('\x1b').unwrap_or(rest.len());
            let (run, after) = rest.split_at(end);
            rest = after;
            return Some(Piece::Text(run));
        };
        let Some(csi) = esc.strip_prefix('[') else {
            let skip = esc.chars().next().map_or(0, char::len_utf8);
            rest = &esc[skip..];
            return Some(Piece::Text(""));
        };
        match csi.char_indices().find(|(_, c)| ('@'..='~').contains(c)) {
            Some((at, last)) => {
                rest = &csi[at + last.len_utf8()..];
                Some(Piece::Escape {
                    params: &csi[..at],
                    last,
                })
            }
            None => {
                rest = "";
                Some(Piece::Text(""))
            }
        }
    })
}

/// `text` without its escape sequences.
pub fn strip(text: &str) -> String {
    pieces(text)
        .filter_map(|piece| match piece {
            Piece::Text(run) => Some(run),
            Piece::Escape { .. } => None,
        })
        .collect()
}

/// A colour as SGR names it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Colour {
    /// 0–255: the 16 terminal colours, the 6×6×6 cube, the 24 greys.
    Indexed(u8),
    Rgb(u8, u8, u8),
}

/// The terminal colours 0–15 on a dark background (the page's), bright ones lighter.
const PALETTE: [&str; 16] = [
    "#3b3b3b", "#e05561", "#8cc265", "#d18f52", "#4aa5f0", "#c162de", "#42b3c2", "#d7dae0",
    "#6b6b6b", "#ff616e", "#a5e075", "#f0a45d", "#4dc4ff", "#de73ff", "#4cd1e0", "#ffffff",
];

impl Colour {
    fn css(self) -> String {
        let (r, g, b) = match self {
            Colour::Indexed(n) if n < 16 => return PALETTE[usize::from(n)].to_string(),
            Colour::Indexed(n) if n < 232 => {
                let level = |v: u8| if v == 0 { 0 } else { 55 + v * 40 };
                let n = n - 16;
                (level(n / 36), level(n / 6 % 6), level(n % 6))
            }
            Colour::Indexed(n) => {
                let grey = 8 + (n - 232) * 10;
                (grey, grey, grey)
            }
            Colour::Rgb(r, g, b) => (r, g, b),
        };
        format!("#{r:02x}{g:02x}{b:02x}")
    }
}

/// What SGR sequences have set so far.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
struct Style {
    bold: bool,
    dim: bool,
    italic: bool,
    underline: bool,
    fg: Option<Colour>,
    bg: Option<Colour>,
}

impl Style {
    /// Applies one SGR sequence's parameters (`1;38;5;9`; empty is a reset).
    fn apply(&mut self, params: &str) {
        let mut codes = params
            .split([';', ':'])
            .map(|code| code.parse::<u8>().unwrap_or(0));
        while let Some(code) = codes.next() {
            match code {
                0 => *self = Style::default(),
                1 => self.bold = true,
                2 => self.dim = true,
                3 => self.italic = true,
                4 => self.underline = true,
                22 => (self.bold, self.dim) = (false, false),
                23 => self.italic = false,
                24 => self.underline = false,
                30..=37 => self.fg = Some(Colour::Indexed(code - 30)),
                90..=97 => self.fg = Some(Colour::Indexed(code - 90 + 8)),
                39 => self.fg = None,
                40..=47 => self.bg = Some(Colour::Indexed(code - 40)),
                100..=107 => self.bg = Some(Colour::Indexed(code - 100 + 8)),
                49 => self.bg = None,
                38 | 48 => {
                    let colour = match codes.next() {
                        Some(5) => codes.next().map(Colour::Indexed),
                        Some(2) => match (codes.next(), codes.next(), codes.next()) {
                            (Some(r), Some(g), Some(b)) => Some(Colour::Rgb(r, g, b)),
                            _ => None,
                        },
                        _ => None,
                    };
                    if code == 38 {
                        self.fg = colour;
                    } else {
                        self.bg = colour;
                    }
                }
                _ => {}
            }
        }
    }

    /// The CSS for this style; empty for the default one.
    fn css(&self) -> String {
        let mut css = String::new();
        if let Some(fg) = self.fg {
            let _ = write!(css, "color:{};", fg.css());
        }
        if let Some(bg) = self.bg {
            let _ = write!(css, "background:{};", bg.css());
        }
        for (on, rule) in [
            (self.bold, "font-weight:bold;"),
            (self.dim, "opacity:.7;"),
            (self.italic, "font-style:italic;"),
            (self.underline, "text-decoration:underline;"),
        ] {
            if on {
                css.push_str(rule);
            }
        }
        css
    }
}

/// `text` as HTML: its characters escaped, each styled run in a
/// `<span style="…">` of its colours, and each source location
/// (`src/lib.rs:4:5`, as rustc's `-->` lines name them) in a `<span class="loc">`.
pub fn to_html(text: &str) -> String {
    let mut html = String::with_capacity(text.len() * 2);
    let mut style = Style::default();
    for piece in pieces(text) {
        match piece {
            Piece::Escape { params, last: 'm' } => style.apply(params),
            Piece::Escape { .. } => {}
            Piece::Text("") => {}
            Piece::Text(run) => {
                let css = style.css();
                if css.is_empty() {
                    push_run(&mut html, run);
                } else {
                    let _ = write!(html, "<span style=\"{css}\">");
                    push_run(&mut html, run);
                    html.push_str("</span>");
                }
            }
        }
    }
    html
}

/// Appends `run` escaped, its locations marked.
fn push_run(html: &mut String, run: &str) {
    let mut rest = run;
    while !rest.is_empty() {
        // Words are split at whitespace; the whitespace goes through as it is.
        let start = rest
            .find(|c: char| !c.is_whitespace())
            .unwrap_or(rest.len());
        html.push_str(&rest[..start]);
        rest = &rest[start..];
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let (word, after) = rest.split_at(end);
        match location(word) {
            Some(len) => {
                html.push_str("<span class=\"loc\">");
                escape_into(html, &word[..len]);
                html.push_str("</span>");
                escape_into(html, &word[len..]);
            }
            None => escape_into(html, word),
        }
        rest = after;
    }
}

/// How much of `word` is a source location: `FILE:LINE` or `FILE:LINE:COLUMN`,
/// where FILE has an extension (`src/lib.rs:4:5`, `Cargo.toml:7`); punctuation
/// after it (`,`, `)`) is not part of it.
pub fn location(word: &str) -> Option<usize> {
    let len = word
        .trim_end_matches([',', ';', ')', ']', '.', '\'', '`'])
        .len();
    let mut parts = word[..len].rsplitn(3, ':');
    let last = parts.next()?;
    let middle = parts.next()?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let file = match parts.next() {
        Some(file) if digits(middle) && digits(last) => file,
        _ if digits(last) => middle,
        _ => return None,
    };
    let name = file.rsplit('/').next()?;
    let has_extension = name
        .rsplit_once('.')
        .is_some_and(|(stem, ext)| !stem.is_empty() && !ext.is_empty());
    has_extension.then_some(len)
}

/// Appends `text` with `<`, `>`, `&` and `"` escaped.
pub fn escape_into(html: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '<' => html.push_str("&lt;"),
            '>' => html.push_str("&gt;"),
            '&' => html.push_str("&amp;"),
            '"' => html.push_str("&quot;"),
            _ => html.push(c),
        }
    }
}

/// `text` with `<`, `>`, `&` and `"` escaped.
pub fn escape(text: &str) -> String {
    let mut html = String::with_capacity(text.len());
    escape_into(&mut html, text);
    html
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What rustc 1.9x prints for a missing semicolon, colours on.
    const RUSTC: &str = "\x1b[0m\x1b[1m\x1b[38;5;9merror\x1b[0m\x1b[0m\x1b[1m: expected `;`, found `}`\x1b[0m\n\x1b[0m \x1b[0m\x1b[0m\x1b[1m\x1b[38;5;12m--> \x1b[0m\x1b[0msrc/lib.rs:4:37\x1b[0m\n";

    #[test]
    fn strips_every_escape() {
        assert_eq!(
            strip(RUSTC),
            "error: expected `;`, found `}`\n --> src/lib.rs:4:37\n"
        );
        assert_eq!(strip("a\x1b[2Kb\x1b[1;31mc\x1b[m"), "abc");
        assert_eq!(strip("cut \x1b[1;3"), "cut ");
    }

    #[test]
    fn colours_become_spans_and_locations_are_marked() {
        let html = to_html(RUSTC);
        assert!(
            html.starts_with("<span style=\"color:#ff616e;font-weight:bold;\">error</span>"),
            "{html}"
        );
        assert!(
            html.contains("<span style=\"font-weight:bold;\">: expected `;`, found `}`</span>"),
            "{html}"
        );
        assert!(
            html.contains("<span style=\"color:#4dc4ff;font-weight:bold;\">--&gt; </span>"),
            "{html}"
        );
        assert!(
            html.contains("<span class=\"loc\">src/lib.rs:4:37</span>"),
            "{html}"
        );
    }

    #[test]
    fn text_is_escaped_and_other_colour_forms_are_read() {
        assert_eq!(to_html("<b> & \"x\""), "&lt;b&gt; &amp; &quot;x&quot;");
        assert_eq!(
            to_html("\x1b[31;44mx\x1b[39my\x1b[0mz"),
            "<span style=\"color:#e05561;background:#4aa5f0;\">x</span>\
             <span style=\"background:#4aa5f0;\">y</span>z"
        );
        assert_eq!(
            to_html("\x1b[38;2;1;2;3mx\x1b[38;5;196my\x1b[38;5;244mz"),
            "<span style=\"color:#010203;\">x</span><span style=\"color:#ff0000;\">y</span>\
             <span style=\"color:#808080;\">z</span>"
        );
    }

    #[test]
    fn locations_are_files_with_a_line() {
        assert_eq!(location("src/lib.rs:4:37"), Some(15));
        assert_eq!(location("Cargo.toml:7,"), Some(12));
        assert_eq!(location("/home/me/x/src/main.rs:10:1)"), Some(27));
        for word in [
            "12:30:00",
            "http://x:80",
            "error[E0425]:",
            "lib.rs",
            "a:b:c",
            ".rs:1",
        ] {
            assert_eq!(location(word), None, "{word}");
        }
    }
}
