//! A strict reader of the Prometheus text format (0.0.4) for tests: the unit tests
//! of the registry and the end-to-end tests that scrape `/metrics` both use it.

use std::collections::BTreeMap;

/// One sample's name and labels (sorted).
type Series = (String, BTreeMap<String, String>);

/// The samples of one scrape.
#[derive(Debug)]
pub struct Samples(BTreeMap<Series, f64>);

/// Reads `# HELP` and `# TYPE` lines, then samples `name{label="value",...} number`.
/// Panics on anything else, on a sample outside the family its `# TYPE` declared (a
/// histogram's are `_bucket`, `_sum` and `_count`), and on a sample given twice.
pub fn parse(text: &str) -> Samples {
    let mut samples = BTreeMap::new();
    let mut family: Option<(&str, &str)> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            family = Some((name, kind));
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        assert!(!line.starts_with('#'), "unexpected comment: {line}");
        let (series, value) = line.rsplit_once(' ').expect("sample and value");
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("value in {line}"));
        let (name, labels) = match series.split_once('{') {
            Some((name, labels)) => (name, parse_labels(labels.strip_suffix('}').unwrap())),
            None => (series, BTreeMap::new()),
        };
        let (declared, kind) = family.expect("a sample before any # TYPE");
        let suffixes: &[&str] = match kind {
            "histogram" => &["_bucket", "_sum", "_count"],
            _ => &[""],
        };
        assert!(
            suffixes
                .iter()
                .any(|suffix| name.strip_suffix(suffix) == Some(declared)),
            "sample {name} outside its family {declared}"
        );
        let old = samples.insert((name.to_string(), labels), value);
        assert!(old.is_none(), "sample given twice: {line}");
    }
    Samples(samples)
}

/// `a="x",b="y\"z"` (without the braces).
fn parse_labels(mut text: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    while !text.is_empty() {
        let (key, rest) = text.split_once("=\"").expect("label=\"value\"");
        assert!(
            key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "label name {key}"
        );
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next().expect("closing quote") {
                (_, '\\') => match chars.next().expect("escaped char").1 {
                    'n' => value.push('\n'),
                    c => value.push(c),
                },
                (i, '"') => break i,
                (_, c) => value.push(c),
            }
        };
        labels.insert(key.to_string(), value);
        let rest = &rest[end + 1..];
        text = rest.strip_prefix(',').unwrap_or(rest);
    }
    labels
}

impl Samples {
    /// The value of the sample `name` with exactly `labels`; panics if there is none.
    pub fn get(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        let labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let series = (name.to_string(), labels);
        *self
            .0
            .get(&series)
            .unwrap_or_else(|| panic!("no sample {series:?}"))
    }
}
