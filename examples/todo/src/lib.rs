//! `todo`: a JSON API whose todos live in the app's key-value store
//! (`wedge_sdk::kv` with the `json` feature), so they outlive requests, instances
//! and restarts, and (with a Redis backend) are shared by every wedge.
//!
//! - `GET /todos` every todo, by id: `[{"id", "title", "done"}]`.
//! - `POST /todos` `{"title"}` → `201` + `location`, the todo with the next id
//!   (an atomic counter, so concurrent creations never share one).
//! - `GET /todos/:id`, `PUT /todos/:id` `{"title", "done"}`, `DELETE /todos/:id`
//!   (`204`); an unknown id is `404`.
//!
//! Errors are `{"error": message}` with their status: bad JSON or a bad title
//! `400`, a store refusal or fault `500`.

use serde::{Deserialize, Serialize};
use wedge_sdk::kv::Store;
use wedge_sdk::{Error, Request, Response, Router};

const MAX_BODY: usize = 16 * 1024;
const MAX_TITLE: usize = 200;
/// Each todo is the key `todo:ID`; the next id is the counter `next-id`.
const PREFIX: &str = "todo:";

#[derive(Serialize, Deserialize)]
struct Todo {
    id: u64,
    title: String,
    done: bool,
}

#[derive(Deserialize)]
struct Edit {
    title: String,
    #[serde(default)]
    done: bool,
}

#[derive(Serialize)]
struct Problem {
    error: String,
}

fn checked(edit: Edit) -> Result<Edit, Error> {
    let title = edit.title.trim();
    if title.is_empty() || title.chars().count() > MAX_TITLE {
        return Err(Error::http(
            400,
            format_args!("title must be 1 to {MAX_TITLE} characters"),
        ));
    }
    Ok(Edit {
        title: title.to_owned(),
        ..edit
    })
}

fn id(req: &Request) -> Result<u64, Error> {
    let id = req.param("id").unwrap_or_default();
    id.parse()
        .map_err(|_| Error::http(404, format_args!("no todo `{id}`")))
}

fn key(id: u64) -> String {
    format!("{PREFIX}{id}")
}

fn found(store: &Store, id: u64) -> Result<Todo, Error> {
    store
        .get_json(&key(id))?
        .ok_or_else(|| Error::http(404, format_args!("no todo {id}")))
}

async fn list(_req: Request) -> Result<Response, Error> {
    let store = Store::open_default()?;
    let mut todos = Vec::new();
    for key in store.keys()? {
        if key.starts_with(PREFIX)
            && let Some(todo) = store.get_json::<Todo>(&key)?
        {
            todos.push(todo);
        }
    }
    todos.sort_by_key(|todo| todo.id);
    Ok(Response::json(&todos))
}

async fn create(req: Request) -> Result<Response, Error> {
    let todos = format!("{}/todos", req.base_path());
    let edit = checked(req.json(MAX_BODY).await?)?;
    let store = Store::open_default()?;
    let id = store.increment("next-id", 1)? as u64;
    let todo = Todo {
        id,
        title: edit.title,
        done: edit.done,
    };
    store.set_json(&key(id), &todo)?;
    Ok(Response::json(&todo)
        .with_status(201)
        .with_header("location", format!("{todos}/{id}")))
}

async fn show(req: Request) -> Result<Response, Error> {
    let store = Store::open_default()?;
    Ok(Response::json(&found(&store, id(&req)?)?))
}

async fn replace(req: Request) -> Result<Response, Error> {
    let id = id(&req)?;
    let edit = checked(req.json(MAX_BODY).await?)?;
    let store = Store::open_default()?;
    found(&store, id)?;
    let todo = Todo {
        id,
        title: edit.title,
        done: edit.done,
    };
    store.set_json(&key(id), &todo)?;
    Ok(Response::json(&todo))
}

async fn remove(req: Request) -> Result<Response, Error> {
    let id = id(&req)?;
    let store = Store::open_default()?;
    found(&store, id)?;
    store.delete(&key(id))?;
    Ok(Response::new(204))
}

/// Answers errors as `{"error": message}` with the error's status.
async fn json_errors(result: impl Future<Output = Result<Response, Error>>) -> Response {
    result.await.unwrap_or_else(|e| {
        Response::json(&Problem {
            error: e.to_string(),
        })
        .with_status(e.status())
    })
}

async fn handle(req: Request) -> Response {
    Router::new()
        .get("/todos", |req| json_errors(list(req)))
        .post("/todos", |req| json_errors(create(req)))
        .get("/todos/:id", |req| json_errors(show(req)))
        .put("/todos/:id", |req| json_errors(replace(req)))
        .delete("/todos/:id", |req| json_errors(remove(req)))
        .handle(req)
        .await
}

wedge_sdk::export_handler!(handle);
