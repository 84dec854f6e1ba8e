//! `hf` seeds against the Hub test double (`synthgate_testkit::mock_hub`): a single file, a
//! glob (paginated listing), a large file behind the Hub's redirect to its storage, the cache
//! (a second resolve downloads nothing), private repositories with and without the server's
//! token, and what a job may not choose (its own token, another endpoint). Both backends.

use serde_json::{Value, json};
use synthgate::datasets::DatasetSourceKind;
use synthgate::datasets::sources::hf::resolve;
use synthgate_testkit::mock_hub::MockHub;

use super::{ctx, one_issue, rows_of, sources};
use crate::db::{TestDb, both_backends};

both_backends!(
    hub_files_and_globs_are_fetched_once,
    private_repositories_need_the_servers_token,
    a_job_chooses_no_endpoint,
    redirects_off_the_hubs_hosts_are_not_followed,
);

const TOKEN: &str = "hf_SERVERtoken_9d81c2";

/// A CSV of `n` rows, `id,text`.
fn csv(n: usize, tag: &str) -> Vec<u8> {
    let mut s = String::from("id,text\n");
    for i in 0..n {
        s.push_str(&format!("{i},{tag} row {i}\n"));
    }
    s.into_bytes()
}

async fn hub_files_and_globs_are_fetched_once(db: TestDb) {
    let hub = MockHub::start().await.unwrap();
    let big = csv(2000, "big");
    assert!(big.len() > 10 * 1024, "large enough to be an LFS file");
    let sha = hub.add_dataset(
        "acme/reviews",
        &[
            ("README.md", b"# reviews"),
            ("data/train.csv", &csv(3, "train")),
            ("data/test.csv", &csv(2, "test")),
            ("data/extra/more.csv", b"id,text\n9,more\n"),
            ("big/all.csv", &big),
        ],
        false,
    );
    hub.set_page_size(2);
    let s = sources(|c| {
        c.datasets.hf.endpoint = hub.endpoint();
        c.datasets.hf.redirect_hosts.push(hub.storage());
    });
    let cx = ctx(db.store.as_ref(), None, &s);
    let endpoint = hub.endpoint();

    let one = resolve(&cx, "datasets/acme/reviews/data/train.csv", &endpoint, None)
        .await
        .unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].name, "train.csv");
    assert_eq!(one[0].source, DatasetSourceKind::Hf);
    assert!(
        one[0].source_ref.as_deref().unwrap().contains(&sha),
        "cached by commit: {:?}",
        one[0].source_ref
    );
    let rows = rows_of(db.store.as_ref(), &one[0]).await;
    assert_eq!(
        Value::Object(rows[2].clone()),
        json!({"id": 2, "text": "train row 2"})
    );

    // A glob, in path order, over a listing of several pages.
    let globbed = resolve(&cx, "datasets/acme/reviews/data/*.csv", &endpoint, None)
        .await
        .unwrap();
    let names: Vec<&str> = globbed.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["test.csv", "train.csv"]);
    assert_eq!(globbed[1].id, one[0].id, "train.csv was cached");
    let deep = resolve(&cx, "datasets/acme/reviews/**/m*.csv", &endpoint, None)
        .await
        .unwrap();
    assert_eq!(deep[0].name, "more.csv");
    assert!(
        hub.requests().iter().any(|r| r.path.contains("cursor=")),
        "pages were followed"
    );

    // A revision pinned by `@`.
    let pinned = resolve(
        &cx,
        &format!("datasets/acme/reviews@{sha}/data/test.csv"),
        &endpoint,
        None,
    )
    .await
    .unwrap();
    assert_eq!(pinned[0].id, globbed[0].id);

    // The large file comes through the redirect to storage.
    let large = resolve(&cx, "datasets/acme/reviews/big/all.csv", &endpoint, None)
        .await
        .unwrap();
    assert_eq!(large[0].num_rows, 2000);
    assert!(hub.requests().iter().any(|r| r.server == "cdn"));

    let before = hub.total_downloads();
    assert_eq!(before, 4, "each file downloaded once");
    for path in ["data/train.csv", "data/*.csv", "**/m*.csv", "big/all.csv"] {
        resolve(
            &cx,
            &format!("datasets/acme/reviews/{path}"),
            &endpoint,
            None,
        )
        .await
        .unwrap();
    }
    assert_eq!(
        hub.total_downloads(),
        before,
        "a second job downloads nothing"
    );
    assert_eq!(hub.downloads("acme/reviews", "data/train.csv"), 1);

    // A new commit on main is fetched again.
    hub.add_dataset("acme/reviews", &[("data/train.csv", &csv(1, "v2"))], false);
    let v2 = resolve(&cx, "datasets/acme/reviews/data/train.csv", &endpoint, None)
        .await
        .unwrap();
    assert_ne!(v2[0].id, one[0].id);
    assert_eq!(v2[0].num_rows, 1);

    // What is not there says so.
    for (path, field_msg) in [
        ("datasets/acme/nope/x.csv", "no dataset repository"),
        ("datasets/acme/reviews/data/missing.csv", "no file"),
        ("datasets/acme/reviews@v9/data/train.csv", "no revision"),
        ("datasets/acme/reviews/data/*.parquet", "matches"),
    ] {
        let issue = one_issue(resolve(&cx, path, &endpoint, None).await);
        assert_eq!(
            issue.code, "seed_dataset_not_found",
            "{path}: {}",
            issue.message
        );
        assert_eq!(issue.field.as_deref(), Some("seed_config.source.path"));
        assert!(
            issue.message.contains(field_msg),
            "{path}: {}",
            issue.message
        );
    }
    let readme = one_issue(resolve(&cx, "datasets/acme/reviews/README.md", &endpoint, None).await);
    assert_eq!(readme.code, "invalid_seed_config");
    let model = one_issue(resolve(&cx, "acme/reviews/data/train.csv", &endpoint, None).await);
    assert_eq!(model.code, "invalid_seed_config");
}

async fn private_repositories_need_the_servers_token(db: TestDb) {
    let hub = MockHub::start().await.unwrap();
    hub.set_token(Some(TOKEN));
    hub.add_dataset("acme/private", &[("data.csv", &csv(20_000, "p"))], true);
    let endpoint = hub.endpoint();
    let storage = hub.storage();

    let anonymous = sources(|c| c.datasets.hf.endpoint = endpoint.clone());
    let issue = one_issue(
        resolve(
            &ctx(db.store.as_ref(), None, &anonymous),
            "datasets/acme/private/data.csv",
            &endpoint,
            None,
        )
        .await,
    );
    assert_eq!(issue.code, "seed_dataset_not_found");
    assert!(issue.message.contains("no Hub token"), "{}", issue.message);

    let wrong = sources(|c| {
        c.datasets.hf.endpoint = endpoint.clone();
        c.datasets.hf.token = Some("hf_wrong".to_owned().into());
    });
    let issue = one_issue(
        resolve(
            &ctx(db.store.as_ref(), None, &wrong),
            "datasets/acme/private/data.csv",
            &endpoint,
            None,
        )
        .await,
    );
    assert_eq!(issue.code, "seed_fetch_failed");
    assert!(issue.message.contains("401"), "{}", issue.message);
    assert!(!issue.message.contains("hf_wrong"));

    let with_token = sources(|c| {
        c.datasets.hf.endpoint = endpoint.clone();
        c.datasets.hf.redirect_hosts.push(storage.clone());
        c.datasets.hf.token = Some(TOKEN.to_owned().into());
    });
    let found = resolve(
        &ctx(db.store.as_ref(), None, &with_token),
        "datasets/acme/private/data.csv",
        &endpoint,
        None,
    )
    .await
    .unwrap();
    assert_eq!(found[0].num_rows, 20_000);
    // The token went to the Hub, never to the storage the Hub redirected to.
    let requests = hub.requests();
    assert!(requests.iter().any(|r| r.server == "cdn"));
    for r in &requests {
        if r.server == "cdn" {
            assert_eq!(r.authorization, None, "the token reached the CDN: {r:?}");
        }
    }
    assert!(
        requests
            .iter()
            .any(|r| r.authorization.as_deref() == Some(format!("Bearer {TOKEN}").as_str())),
    );
}

async fn a_job_chooses_no_endpoint(db: TestDb) {
    let hub = MockHub::start().await.unwrap();
    hub.add_dataset("acme/reviews", &[("data.csv", &csv(2, "x"))], false);
    let s = sources(|c| {
        c.datasets.hf.endpoint = hub.endpoint();
        c.datasets.hf.redirect_hosts.push(hub.storage());
    });
    let cx = ctx(db.store.as_ref(), None, &s);
    let path = "datasets/acme/reviews/data.csv";

    // A stored config's redaction marker is not a token: the job is asked for the token.
    let marker =
        synthgate::domain::dataset::SeedToken(synthgate::domain::dataset::REDACTED_TOKEN.into());
    let issue = one_issue(resolve(&cx, path, &hub.endpoint(), Some(&marker)).await);
    assert_eq!(issue.code, "invalid_seed_config");
    assert_eq!(issue.field.as_deref(), Some("seed_config.source.token"));

    let issue = one_issue(resolve(&cx, path, "https://hub.attacker.example", None).await);
    assert_eq!(issue.code, "seed_endpoint_not_allowed");
    assert_eq!(issue.field.as_deref(), Some("seed_config.source.endpoint"));
    let issue = one_issue(resolve(&cx, path, "http://169.254.169.254", None).await);
    assert_eq!(issue.code, "seed_endpoint_not_allowed");
    assert!(
        hub.requests().is_empty(),
        "nothing was fetched for a refused job"
    );

    // DataDesigner's default (what its configs carry) means the configured Hub.
    let dd_default = resolve(&cx, path, "https://huggingface.co", None)
        .await
        .unwrap();
    assert_eq!(dd_default[0].num_rows, 2);
    // A trailing slash is the same endpoint.
    let ok = resolve(&cx, path, &format!("{}/", hub.endpoint()), None)
        .await
        .unwrap();
    assert_eq!(ok[0].num_rows, 2);

    let off = sources(|c| {
        c.datasets.hf.endpoint = hub.endpoint();
        c.datasets.hf.redirect_hosts.push(hub.storage());
        c.datasets.hf.enabled = false;
    });
    let issue = one_issue(
        resolve(
            &ctx(db.store.as_ref(), None, &off),
            path,
            &hub.endpoint(),
            None,
        )
        .await,
    );
    assert_eq!(issue.code, "unsupported_seed_source");
}

/// The Hub redirects large files to its storage. A redirect to a host that is neither the
/// endpoint's origin nor under `datasets.hf.redirect_hosts` (here: the storage's origin, left
/// out of the list) is not followed: it could point the server at any internal address.
async fn redirects_off_the_hubs_hosts_are_not_followed(db: TestDb) {
    let hub = MockHub::start().await.unwrap();
    hub.add_dataset("acme/big", &[("all.csv", &csv(2000, "big"))], false);
    let endpoint = hub.endpoint();
    let s = sources(|c| c.datasets.hf.endpoint = endpoint.clone());
    let issue = one_issue(
        resolve(
            &ctx(db.store.as_ref(), None, &s),
            "datasets/acme/big/all.csv",
            &endpoint,
            None,
        )
        .await,
    );
    assert_eq!(issue.code, "seed_fetch_failed");
    assert!(
        issue.message.contains("datasets.hf.redirect_hosts"),
        "{}",
        issue.message
    );
    let storage = hub.requests().iter().filter(|r| r.server == "cdn").count();
    assert_eq!(storage, 0, "nothing fetched from the storage");
}
