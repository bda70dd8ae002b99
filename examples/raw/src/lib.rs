//! `raw`: a component written against bindings generated straight from
//! wedge's `wit/` folder (world `wedge:host/handler`, i.e. `wasi:http/proxy`)
//! with `wit-bindgen`, no SDK. Answers `200 Hello from a raw component!\n`.
//! Proves that plain `wasi:http/proxy` components run on wedge.

wit_bindgen::generate!({
    path: "../../wit",
    world: "wedge:host/handler",
    generate_all,
});

use exports::wasi::http::incoming_handler::Guest;
use wasi::http::types::{
    Fields, IncomingRequest, OutgoingBody, OutgoingResponse, ResponseOutparam,
};

const BODY: &[u8] = b"Hello from a raw component!\n";

struct Raw;

impl Guest for Raw {
    fn handle(_request: IncomingRequest, response_out: ResponseOutparam) {
        let headers = Fields::from_list(&[
            (
                "content-type".to_string(),
                b"text/plain; charset=utf-8".to_vec(),
            ),
            (
                "content-length".to_string(),
                BODY.len().to_string().into_bytes(),
            ),
        ])
        .expect("valid headers");
        let response = OutgoingResponse::new(headers);
        response.set_status_code(200).expect("valid status");
        let body = response.body().expect("body taken once");
        ResponseOutparam::set(response_out, Ok(response));

        let stream = body.write().expect("stream taken once");
        // `blocking-write-and-flush` takes at most 4096 bytes per call.
        for chunk in BODY.chunks(4096) {
            if stream.blocking_write_and_flush(chunk).is_err() {
                return; // client gone: dropping the body aborts it
            }
        }
        drop(stream); // the stream must go before its body is finished
        OutgoingBody::finish(body, None).expect("finish body");
    }
}

export!(Raw);
