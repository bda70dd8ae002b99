//! Reading a parsed TOML document field by field, keeping each value's line
//! and key path, and collecting every problem instead of stopping at the first.

use std::ops::Range;

use toml::Spanned;
use toml::de::{DeString, DeTable, DeValue};

use crate::errors::ConfigError;
use crate::limits::{parse_duration, parse_size};

type Value<'i> = Spanned<DeValue<'i>>;

/// The document's text (to turn spans into lines) and the problems found so far.
pub(super) struct Doc<'t> {
    text: &'t str,
    pub errors: Vec<ConfigError>,
}

impl<'t> Doc<'t> {
    pub fn new(text: &'t str) -> Self {
        Doc {
            text,
            errors: Vec::new(),
        }
    }

    pub fn line(&self, span: &Range<usize>) -> usize {
        let start = span.start.min(self.text.len());
        self.text.as_bytes()[..start]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    /// A problem with the file as a whole, not one key.
    pub fn error_in_file(&mut self, message: &str) {
        self.errors.push(ConfigError {
            line: None,
            key: String::new(),
            message: message.to_string(),
        });
    }

    pub fn error(&mut self, span: &Range<usize>, key: &str, message: impl Into<String>) {
        self.errors.push(ConfigError {
            line: Some(self.line(span)),
            key: key.to_string(),
            message: message.into(),
        });
    }
}

/// One value, with its key path (e.g. `app[0].limits.memory`).
pub(super) struct Field<'a, 'i> {
    pub key: String,
    value: &'a Value<'i>,
}

impl<'a, 'i> Field<'a, 'i> {
    pub fn span(&self) -> Range<usize> {
        self.value.span()
    }

    pub fn error(&self, doc: &mut Doc, message: impl Into<String>) {
        doc.error(&self.span(), &self.key, message);
    }

    pub fn str(&self, doc: &mut Doc) -> Option<&'a str> {
        match self.value.get_ref() {
            DeValue::String(text) => Some(text.as_ref()),
            _ => self.wrong_type(doc, "a string (in quotes)"),
        }
    }

    /// The string value through `parse`, whose error becomes the message.
    pub fn parse<T>(
        &self,
        doc: &mut Doc,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        let text = self.str(doc)?;
        parse(text).map_err(|message| self.error(doc, message)).ok()
    }

    /// `"128MiB"`, or a whole number of bytes.
    pub fn size(&self, doc: &mut Doc) -> Option<u64> {
        match self.value.get_ref() {
            DeValue::Integer(_) => self.count(doc, 0),
            _ => self.parse(doc, parse_size),
        }
    }

    pub fn duration(&self, doc: &mut Doc) -> Option<std::time::Duration> {
        self.parse(doc, parse_duration)
    }

    /// A whole number of at least `min`.
    pub fn count<N: TryFrom<u64>>(&self, doc: &mut Doc, min: u64) -> Option<N> {
        let DeValue::Integer(number) = self.value.get_ref() else {
            return self.wrong_type(doc, "a whole number");
        };
        let parsed = u64::from_str_radix(number.as_str(), number.radix()).ok();
        match parsed
            .filter(|n| *n >= min)
            .and_then(|n| N::try_from(n).ok())
        {
            Some(n) => Some(n),
            None => {
                let message = format!(
                    "`{}` is not a whole number of at least {min}",
                    number.as_str()
                );
                self.error(doc, message);
                None
            }
        }
    }

    pub fn array(&self, doc: &mut Doc) -> Option<Vec<Field<'a, 'i>>> {
        let DeValue::Array(items) = self.value.get_ref() else {
            return self.wrong_type(doc, "a list like [\"a\", \"b\"]");
        };
        let fields = items.iter().enumerate().map(|(n, value)| Field {
            key: format!("{}[{n}]", self.key),
            value,
        });
        Some(fields.collect())
    }

    pub fn table(&self, doc: &mut Doc) -> Option<Table<'a, 'i>> {
        match self.value.get_ref() {
            DeValue::Table(table) => Some(Table::new(self.key.clone(), self.span(), table)),
            _ => self.wrong_type(doc, "a table"),
        }
    }

    fn wrong_type<T>(&self, doc: &mut Doc, expected: &str) -> Option<T> {
        self.error(doc, format!("must be {expected}"));
        None
    }
}

/// A table whose keys are taken one by one; what nobody took is unknown.
pub(super) struct Table<'a, 'i> {
    key: String,
    span: Range<usize>,
    entries: Vec<(&'a Spanned<DeString<'i>>, &'a Value<'i>, bool)>,
    /// The keys asked for, to list them when an unknown one turns up.
    known: Vec<&'static str>,
}

impl<'a, 'i> Table<'a, 'i> {
    pub fn new(key: String, span: Range<usize>, table: &'a DeTable<'i>) -> Self {
        let entries = table.iter().map(|(k, v)| (k, v, false)).collect();
        Table {
            key,
            span,
            entries,
            known: Vec::new(),
        }
    }

    pub fn take(&mut self, name: &'static str) -> Option<Field<'a, 'i>> {
        self.known.push(name);
        let (_, value, taken) = self
            .entries
            .iter_mut()
            .find(|(key, _, _)| key.get_ref() == name)?;
        *taken = true;
        let value = *value;
        Some(Field {
            key: child_key(&self.key, name),
            value,
        })
    }

    pub fn required(&mut self, doc: &mut Doc, name: &'static str) -> Option<Field<'a, 'i>> {
        let field = self.take(name);
        if field.is_none() {
            doc.error(&self.span, &self.key, format!("missing `{name}`"));
        }
        field
    }

    /// Every entry, for tables whose keys are free (env, config).
    pub fn entries(self) -> Vec<(&'a str, Field<'a, 'i>)> {
        let parent = self.key;
        let entries = self.entries.into_iter().map(|(key, value, _)| {
            let name: &'a str = key.get_ref().as_ref();
            let key = child_key(&parent, name);
            (name, Field { key, value })
        });
        entries.collect()
    }

    /// Reports every key no `take` asked for.
    pub fn finish(self, doc: &mut Doc) {
        for (key, _, _) in self.entries.iter().filter(|(_, _, taken)| !taken) {
            let message = format!(
                "unknown key `{}`; known keys: {}",
                key.get_ref(),
                self.known.join(", ")
            );
            doc.error(&key.span(), &child_key(&self.key, key.get_ref()), message);
        }
    }
}

/// `parent.name`, or `name` at the top of the document.
fn child_key(parent: &str, name: &str) -> String {
    match parent {
        "" => name.to_string(),
        parent => format!("{parent}.{name}"),
    }
}
