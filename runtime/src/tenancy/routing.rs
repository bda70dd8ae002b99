//! Which app answers a request: the apps a listener serves with their routes, swapped
//! whole when apps are deployed, removed or reconfigured. A request takes the app
//! (and its version) current when it arrives and keeps it to the end.

use std::fmt;
use std::sync::{Arc, RwLock};

use http::HeaderValue;

use super::slot::{AppSlot, Serving};
use wedge_config::routes::{DuplicateRoute, Route, RouteTable};

/// One app a site serves: its name and the version it serves now.
pub struct Tenant {
    name: Arc<str>,
    slot: AppSlot,
}

impl Tenant {
    pub fn new(name: &str, serving: Serving) -> Self {
        Tenant {
            name: name.into(),
            slot: AppSlot::new(serving),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The app's current version; replacing it keeps the app's routes.
    pub fn slot(&self) -> &AppSlot {
        &self.slot
    }

    /// Says the tenant was replaced or removed (a reload, a deploy, a removal): see
    /// [`AppSlot::retire`].
    pub(crate) fn retire(&self) {
        self.slot.retire();
    }
}

/// Names the tenant in route conflicts.
impl fmt::Display for Tenant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

impl fmt::Debug for Tenant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tenant").field("name", &self.name).finish()
    }
}

/// Where a request goes: the app, and where the route it matched mounts it.
#[derive(Clone, Debug)]
pub struct Mount {
    pub tenant: Arc<Tenant>,
    /// The route's path prefix (`/api` for `/api` or `example.com/api`), as the
    /// `x-wedge-base-path` request field the guest sees; `None` when it is `/`.
    pub base_path: Option<HeaderValue>,
}

impl Mount {
    fn new(tenant: Arc<Tenant>, route: &Route) -> Mount {
        let base_path = (route.path() != "/").then(|| {
            // Route paths hold no whitespace or control characters.
            HeaderValue::from_str(route.path()).expect("a route path is a field value")
        });
        Mount { tenant, base_path }
    }
}

/// Names the app in route conflicts.
impl fmt::Display for Mount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.tenant.fmt(f)
    }
}

/// The apps of a site and the routes to them.
pub struct Directory {
    routes: RouteTable<Mount>,
    tenants: Vec<Arc<Tenant>>,
}

impl Directory {
    /// `apps` with their routes; a route claimed twice is an error naming both apps.
    pub fn new(apps: Vec<(Arc<Tenant>, Vec<Route>)>) -> Result<Self, Vec<DuplicateRoute<Mount>>> {
        let tenants = apps.iter().map(|(tenant, _)| tenant.clone()).collect();
        let routes = apps
            .into_iter()
            .flat_map(|(tenant, routes)| {
                routes.into_iter().map(move |route| {
                    let mount = Mount::new(tenant.clone(), &route);
                    (route, mount)
                })
            })
            .collect();
        Ok(Directory {
            routes: RouteTable::new(routes)?,
            tenants,
        })
    }

    /// One app answering every request (`wedge serve APP`, `wedge dev`).
    pub fn single(tenant: Arc<Tenant>) -> Self {
        let everything: Route = "/".parse().expect("`/` is a route");
        match Directory::new(vec![(tenant, vec![everything])]) {
            Ok(directory) => directory,
            Err(_) => unreachable!("one route cannot conflict"),
        }
    }

    /// The apps, in the order they were given.
    pub fn tenants(&self) -> &[Arc<Tenant>] {
        &self.tenants
    }

    pub fn tenant(&self, name: &str) -> Option<&Arc<Tenant>> {
        self.tenants.iter().find(|t| t.name() == name)
    }
}

/// The directory a listener serves now.
pub struct Site {
    // As in AppSlot: readers clone an Arc out; a swap happens per deploy or reload.
    current: RwLock<Arc<Directory>>,
}

impl Site {
    pub fn new(directory: Directory) -> Self {
        Site {
            current: RwLock::new(Arc::new(directory)),
        }
    }

    /// A site of one app answering every request.
    pub fn single(tenant: Arc<Tenant>) -> Self {
        Site::new(Directory::single(tenant))
    }

    pub fn directory(&self) -> Arc<Directory> {
        crate::sync::read(&self.current).clone()
    }

    /// Serves `directory` from the next request on.
    pub fn replace(&self, directory: Directory) {
        *crate::sync::write(&self.current) = Arc::new(directory);
    }

    /// The app for a request to `host` and `path`; `None` when no route matches.
    pub fn route(&self, host: Option<&str>, path: &str) -> Option<Mount> {
        self.directory().routes.lookup(host, path).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::BuildFailure;

    fn tenant(name: &str) -> Arc<Tenant> {
        let failure = BuildFailure {
            app: name.into(),
            errors: String::new(),
        };
        Arc::new(Tenant::new(name, Serving::BuildFailed(Arc::new(failure))))
    }

    fn routes(list: &[&str]) -> Vec<Route> {
        list.iter().map(|r| r.parse().unwrap()).collect()
    }

    fn routed(site: &Site, host: Option<&str>, path: &str) -> Option<String> {
        site.route(host, path).map(|m| m.tenant.name().to_string())
    }

    #[test]
    fn requests_reach_the_tenant_their_route_names() {
        let site = Site::new(
            Directory::new(vec![
                (tenant("api"), routes(&["api.example.com/"])),
                (tenant("hello"), routes(&["/hello"])),
            ])
            .unwrap(),
        );
        assert_eq!(
            routed(&site, Some("api.example.com:8443"), "/x").as_deref(),
            Some("api")
        );
        assert_eq!(
            routed(&site, Some("other"), "/hello/x").as_deref(),
            Some("hello")
        );
        assert_eq!(routed(&site, Some("other"), "/"), None);
    }

    #[test]
    fn a_replaced_directory_serves_the_next_request_and_old_holders_keep_theirs() {
        let site = Site::single(tenant("v1"));
        let held = site.directory();
        site.replace(Directory::single(tenant("v2")));
        assert_eq!(routed(&site, None, "/").as_deref(), Some("v2"));
        assert_eq!(held.tenants()[0].name(), "v1");
    }

    #[test]
    fn a_request_learns_the_path_its_route_mounts_the_app_on() {
        let site = Site::new(
            Directory::new(vec![
                (tenant("api"), routes(&["/api", "api.example.com/v2/"])),
                (tenant("site"), routes(&["/", "www.example.com/"])),
            ])
            .unwrap(),
        );
        let base = |host, path| {
            let mount = site.route(host, path).unwrap();
            mount.base_path.map(|v| v.to_str().unwrap().to_string())
        };
        assert_eq!(base(None, "/api/users").as_deref(), Some("/api"));
        assert_eq!(base(Some("api.example.com"), "/v2").as_deref(), Some("/v2"));
        assert_eq!(base(None, "/apiary"), None);
        assert_eq!(base(Some("www.example.com"), "/api/x"), None);
    }

    #[test]
    fn a_route_claimed_twice_names_both_tenants() {
        let Err(errors) = Directory::new(vec![
            (tenant("a"), routes(&["/x"])),
            (tenant("b"), routes(&["/x"])),
        ]) else {
            panic!("duplicate accepted");
        };
        assert_eq!(
            errors[0].to_string(),
            "route `/x` is claimed by both `a` and `b`"
        );
    }
}
