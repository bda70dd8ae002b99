//! `json-api`: a small JSON API on the SDK's `Router`. Each request gets a
//! fresh in-memory store seeded with two items (instances share nothing, so
//! nothing persists between requests):
//!
//! - `GET /items` — the items as a JSON array;
//! - `GET /items/:id` — one item, or `404 {"error": ...}`; a non-numeric id is `400`;
//! - `POST /items` with `{"name": string, "price_cents": number}` — `201` with the
//!   created item (the next id), `location: /items/<id>` (below the app's mount
//!   point: `/api/items/<id>` on the route `/api`); invalid JSON or a failed
//!   validation (blank or over-long name, price over 1 000 000) is
//!   `400 {"error": ...}`, a body over 16 KiB `413 {"error": ...}`.
//!
//! Other paths are the router's plain-text `404`; other methods on these paths
//! are `405` with `allow`.

use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::rc::Rc;
use wedge_sdk::{Error, Request, Response, Router};

/// Largest request body `POST /items` reads.
const MAX_BODY: usize = 16 * 1024;
const MAX_NAME: usize = 100;
const MAX_PRICE_CENTS: u64 = 1_000_000;

#[derive(Serialize, Clone)]
struct Item {
    id: u64,
    name: String,
    price_cents: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewItem {
    name: String,
    price_cents: u64,
}

#[derive(Serialize)]
struct Problem {
    error: String,
}

/// The state one request sees.
struct Store {
    items: Vec<Item>,
}

type Shared = Rc<RefCell<Store>>;

impl Store {
    fn seeded() -> Shared {
        let item = |id, name: &str, price_cents| Item {
            id,
            name: name.to_owned(),
            price_cents,
        };
        let items = vec![item(1, "tea", 350), item(2, "coffee", 420)];
        Rc::new(RefCell::new(Store { items }))
    }
}

async fn list(store: Shared, _req: Request) -> Result<Response, Error> {
    Ok(Response::json(&store.borrow().items))
}

async fn show(store: Shared, req: Request) -> Result<Response, Error> {
    let id = req.param("id").unwrap_or_default();
    let id: u64 = id
        .parse()
        .map_err(|_| Error::http(400, format_args!("item ids are numbers, not {id:?}")))?;
    let store = store.borrow();
    let item = store.items.iter().find(|i| i.id == id);
    let item = item.ok_or_else(|| Error::http(404, format_args!("no item {id}")))?;
    Ok(Response::json(item))
}

async fn create(store: Shared, req: Request) -> Result<Response, Error> {
    // The item's URL is below where the app is mounted (`/api/items/3` on `/api`).
    let items = format!("{}/items", req.base_path());
    let new: NewItem = req.json(MAX_BODY).await?;
    let name = new.name.trim();
    if name.is_empty() || name.chars().count() > MAX_NAME {
        return Err(Error::http(
            400,
            format_args!("name must be 1 to {MAX_NAME} characters"),
        ));
    }
    if new.price_cents > MAX_PRICE_CENTS {
        return Err(Error::http(
            400,
            format_args!("price_cents must be at most {MAX_PRICE_CENTS}"),
        ));
    }
    let mut store = store.borrow_mut();
    let id = store.items.iter().map(|i| i.id).max().unwrap_or(0) + 1;
    let item = Item {
        id,
        name: name.to_owned(),
        price_cents: new.price_cents,
    };
    let response = Response::json(&item)
        .with_status(201)
        .with_header("location", format!("{items}/{id}"));
    store.items.push(item);
    Ok(response)
}

/// Answer errors as `{"error": message}` with the error's status.
async fn json_errors(result: impl Future<Output = Result<Response, Error>>) -> Response {
    result.await.unwrap_or_else(|e| {
        Response::json(&Problem {
            error: e.to_string(),
        })
        .with_status(e.status())
    })
}

async fn handle(req: Request) -> Response {
    let store = Store::seeded();
    let (s1, s2, s3) = (store.clone(), store.clone(), store);
    Router::new()
        .get("/items", move |req| json_errors(list(s1.clone(), req)))
        .post("/items", move |req| json_errors(create(s2.clone(), req)))
        .get("/items/:id", move |req| json_errors(show(s3.clone(), req)))
        .handle(req)
        .await
}

wedge_sdk::export_handler!(handle);
