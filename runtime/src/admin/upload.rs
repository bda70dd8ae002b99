//! What `PUT /apps/{name}` carries: a `multipart/form-data` body (as `curl -F`
//! sends) with a `component` part (the .wasm) and an optional `config` part (the
//! app's settings as TOML, the keys of an `[[app]]` table but `name`); without a
//! `component` part, the settings name an `oci://` component
//! (`component = "oci://…"`). Both sides are here: the server reads the form,
//! `wedge deploy` writes it.

use bytes::Bytes;
use http::StatusCode;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use multer::{Constraints, Multipart, SizeLimit};
use sha2::{Digest, Sha256};

/// The part holding the component's bytes.
pub const COMPONENT: &str = "component";
/// The part holding the app's settings (TOML).
pub const CONFIG: &str = "config";

/// A deploy's component and settings.
pub struct Upload {
    /// `None` when the form had no `component` part: the settings name one.
    pub component: Option<Bytes>,
    /// Empty when the form had no `config` part: defaults and no routes.
    pub config: String,
    /// The names of the files the parts came from, as the client gave them (`curl
    /// -F component=@app.wasm` sends `app.wasm`), for messages.
    pub component_file: Option<String>,
    pub config_file: Option<String>,
}

/// Why an upload was refused: the status and one line saying why.
#[derive(Debug)]
pub struct Refused(pub StatusCode, pub String);

/// Reads the form of `request`, at most `max` bytes of it.
pub async fn read(request: http::Request<Incoming>, max: u64) -> Result<Upload, Refused> {
    let content_type = request
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("");
    let boundary = multer::parse_boundary(content_type).map_err(|_| {
        Refused(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "expected multipart/form-data with a `{COMPONENT}` part (the .wasm) \
                 and a `{CONFIG}` part (TOML), as `curl -F {COMPONENT}=@app.wasm -F {CONFIG}=@app.toml` sends"
            ),
        )
    })?;
    let constraints = Constraints::new()
        .allowed_fields(vec![COMPONENT, CONFIG])
        .size_limit(SizeLimit::new().whole_stream(max));
    let body = request.into_body().into_data_stream();
    let mut form = Multipart::with_constraints(body, boundary, constraints);
    let (mut component, mut config) = (None, None);
    while let Some(part) = form.next_field().await.map_err(refused)? {
        let name = part.name().unwrap_or_default().to_string();
        let file = part.file_name().map(str::to_string);
        let bytes = part.bytes().await.map_err(refused)?;
        let slot = if name == COMPONENT {
            &mut component
        } else {
            &mut config
        };
        if slot.replace((bytes, file)).is_some() {
            return Err(bad_request(format!("the form has two `{name}` parts")));
        }
    }
    let (config, config_file) = config.unzip();
    let config = String::from_utf8(config.unwrap_or_default().to_vec())
        .map_err(|_| bad_request(format!("the `{CONFIG}` part is not UTF-8 text")))?;
    let (component, component_file) = component.unzip();
    Ok(Upload {
        component,
        config,
        component_file: component_file.flatten(),
        config_file: config_file.flatten(),
    })
}

fn bad_request(message: String) -> Refused {
    Refused(StatusCode::BAD_REQUEST, message)
}

fn refused(err: multer::Error) -> Refused {
    match err {
        multer::Error::StreamSizeExceeded { limit } => Refused(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the upload is larger than {limit} bytes (--admin-max-upload)"),
        ),
        multer::Error::UnknownField { field_name } => bad_request(format!(
            "unknown part `{}`: the form takes `{COMPONENT}` and `{CONFIG}`",
            field_name.unwrap_or_default()
        )),
        err => bad_request(format!("malformed form: {err}")),
    }
}

/// A file to send as a part of the form: the name it is known by, its bytes.
pub struct File<'a> {
    pub name: &'a str,
    pub bytes: &'a [u8],
}

/// The form for `component` (none: the settings name an `oci://` one) and
/// `config`: its `Content-Type` and its bytes.
pub fn form(component: Option<File>, config: File) -> (String, Bytes) {
    // Derived from the contents, so it cannot be (short of a SHA-256 fixed
    // point) a line of them.
    let mut digest = Sha256::new();
    for file in component.iter().chain([&config]) {
        digest.update(file.bytes);
    }
    let boundary = crate::hex::hex(&digest.finalize());
    let size = component.as_ref().map_or(0, |c| c.bytes.len()) + config.bytes.len();
    let mut body = Vec::with_capacity(size + 512);
    let mut parts = vec![(CONFIG, "application/toml", config)];
    if let Some(component) = component {
        parts.push((COMPONENT, "application/wasm", component));
    }
    for (name, media, file) in parts {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; \
                 filename=\"{}\"\r\nContent-Type: {media}\r\n\r\n",
                quoted(file.name)
            )
            .as_bytes(),
        );
        body.extend_from_slice(file.bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    let content_type = format!("multipart/form-data; boundary={boundary}");
    (content_type, Bytes::from(body))
}

/// `name` inside a quoted `filename` parameter: `"`, CR and LF percent-encoded,
/// as browsers send them.
fn quoted(name: &str) -> String {
    name.replace('"', "%22")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}
