//! A wedge serving a wedge.toml of given apps with the admin API on, and the
//! instance counts its `/metrics` reports: how tests see which instance served what
//! without asking the guest. And h2c requests that park in `p3-probe`'s barrier.

use bytes::Bytes;
use h2::client::SendRequest;

use crate::h3::H3Server;
use crate::{Server, example, temp_dir};

pub use crate::admin::parse_text::Samples;

const TOKEN: &str = "instances-test-token-0123456789";

/// The real binary on 127.0.0.1 (cleartext, TLS and HTTP/3) with the admin API.
pub struct Metered {
    pub h3: H3Server,
    admin: String,
}

/// `[[app]]` table `name` serving example component `example_name` on `route`,
/// with `limits` (lines of `[app.limits]`, may be empty).
pub fn app(name: &str, example_name: &str, route: &str, limits: &str) -> String {
    format!(
        "[[app]]\nname = \"{name}\"\ncomponent = \"{}\"\nroutes = [\"{route}\"]\n\
         [app.limits]\n{limits}\n",
        example(example_name).display()
    )
}

impl Metered {
    /// Serves `apps` (`[[app]]` tables, see [`app`]).
    pub fn start(apps: &[String]) -> Metered {
        Metered::start_with(apps, &[])
    }

    /// Serves `apps` with `flags` added to `wedge serve`'s.
    pub fn start_with(apps: &[String], flags: &[&str]) -> Metered {
        let dir = temp_dir("metered");
        std::fs::write(dir.join("token"), format!("{TOKEN}\n")).unwrap();
        let config = format!(
            "listen = \"127.0.0.1:0\"\ntls_listen = \"127.0.0.1:0\"\n\
             admin = \"127.0.0.1:0\"\nadmin_token_file = \"token\"\n\n{}",
            apps.concat()
        );
        std::fs::write(dir.join("wedge.toml"), config).unwrap();
        let data_dir = temp_dir("data");
        let data = data_dir.display().to_string();
        let mut args = vec!["--data-dir", data.as_str()];
        args.extend_from_slice(flags);
        let server = Server::start_config(&dir.join("wedge.toml"), &args);
        let admin = server.admin_url();
        Metered {
            h3: H3Server { server, data_dir },
            admin,
        }
    }

    pub fn server(&self) -> &Server {
        &self.h3.server
    }

    /// `GET /metrics` on the admin API.
    pub fn samples(&self) -> Samples {
        crate::admin::scrape(&self.admin, TOKEN)
    }

    /// Instances of `app` created so far.
    pub fn created(&self, app: &str) -> f64 {
        self.samples()
            .get("wedge_instances_created_total", &[("app", app)])
    }

    /// Instances of `app` alive now.
    pub fn running(&self, app: &str) -> f64 {
        self.samples()
            .get("wedge_instances_running", &[("app", app)])
    }
}

/// An h2c connection to the real binary's cleartext listener.
pub async fn h2c(server: &Server) -> SendRequest<Bytes> {
    crate::h2::client_with(
        server.authority().parse().unwrap(),
        h2::client::Builder::new(),
    )
    .await
}

/// Sends GET `path` on `client`; the response, to be awaited later.
pub fn send(client: &mut SendRequest<Bytes>, path: &str) -> h2::client::ResponseFuture {
    let request = http::Request::get(format!("http://localhost{path}"))
        .body(())
        .unwrap();
    client.send_request(request, true).unwrap().0
}

/// Status and body of a response sent with [`send`].
pub async fn answer(response: h2::client::ResponseFuture) -> (u16, String) {
    let response = response.await.unwrap();
    let status = response.status().as_u16();
    let body = crate::h2::read_body(response.into_body()).await;
    (status, String::from_utf8(body).unwrap())
}

/// A barrier request parked in the guest: its response to come, and its request
/// body, still open.
pub type Parked = (h2::client::ResponseFuture, h2::SendStream<Bytes>);

/// Sends `count` barrier requests one after the other, each once the previous one is
/// inside the guest (it printed its arrival). Their bodies stay open: the guest
/// reads them to the end before its barrier, so until then it runs no code and the
/// instance has room for the next request.
pub async fn park_at_barrier(
    wedge: &Metered,
    client: &mut SendRequest<Bytes>,
    count: usize,
    n: usize,
) -> Vec<Parked> {
    let mut parked = Vec::new();
    for k in 1..=count {
        let request = http::Request::post(format!("http://localhost/probe/barrier?n={n}"))
            .body(())
            .unwrap();
        parked.push(client.send_request(request, false).unwrap());
        wedge
            .server()
            .wait_for_log(&format!("p3-probe: arrived {k}\n"));
    }
    parked
}
