//! `stacksync diff NAME [--ref REF]`: what a run would do to the stack, as
//! a change set made and deleted again, never executed (`reconcile::diff`).
//! The source is read with the caller's credentials (its secret too, for a
//! private one), and the change set is made with them.

use std::time::Duration;

use serde_json::json;
use stacksync::adapters::cloudformation::SdkCloudFormationFactory;
use stacksync::adapters::s3::S3Store;
use stacksync::adapters::{s3_client, template_url_base};
use stacksync::hash::sha256_hex;
use stacksync::ports::{Blobs, CloudFormationFactory, PortError};
use stacksync::reconcile::diff::{
    Diff, MAX_TEMPLATE_BODY, TemplateAt, Waiting, desired, diff, packaged_files, policy,
};
use stacksync::wiring::sdk_sources;

use crate::Output;
use crate::connect::{Connection, registered};
use crate::error::Result;
use crate::output::print_structured;

pub async fn run(aws: &Connection, name: &str, reference: Option<&str>, format: Output) -> Result {
    let entry = registered(&aws.registry, name).await?;
    let spec = &entry.spec;
    let endpoint = aws.config.endpoint_url().map(str::to_owned);
    let workdir = std::env::temp_dir().join(format!("stacksync-diff-{}", std::process::id()));
    let sources = sdk_sources(&aws.config, endpoint.is_some(), &workdir);
    let wanted = desired(&sources, spec, reference).await;
    let wanted = match wanted {
        Ok(wanted) => wanted,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&workdir);
            return Err(format!("{name}: {e}"));
        }
    };
    let factory = SdkCloudFormationFactory::new(aws.config.clone())
        .for_installation(aws.registry.table().to_owned());
    let cfn = factory
        .for_stack(
            spec.region.as_deref(),
            spec.assume_role_arn.as_deref(),
            Some(&spec.name),
        )
        .await
        .map_err(|e| format!("{name}: {e}"))?;
    let mut wanted = wanted
        .read_values(&factory, &aws.registry, &cfn)
        .await
        .map_err(|e| format!("{name}: {e}"))?;
    let store = S3Store::new(
        s3_client(&aws.config, endpoint.is_some()),
        &aws.resources.bucket,
    );
    // Packaged as a run packages it, its objects under `previews/`.
    let packaged = wanted
        .package(&preview_destination(aws, &store))
        .map_err(|e| format!("{name}: {e}"))?;
    // The Guard rules a run would check, as it checks them.
    let policy = policy::check(&sources, aws.resources.rules.as_ref(), spec, &wanted).await;
    let _ = std::fs::remove_dir_all(&workdir);
    store_objects(aws, name, &store, packaged).await?;
    let (template, stored) = template_at(aws, name, &store, &wanted.template).await?;
    let waiting = Waiting {
        poll: Duration::from_secs(if endpoint.is_some() { 1 } else { 3 }),
        deadline: Duration::from_secs(300),
    };
    let installation = aws.registry.table().to_owned();
    let recorded = entry
        .status
        .applied
        .seen
        .as_ref()
        .map(|s| s.stack_id.as_str());
    let result = diff(
        &cfn,
        spec,
        &installation,
        recorded,
        &wanted,
        template,
        waiting,
    )
    .await;
    if let Some(key) = stored {
        let _ = store.delete(&key).await;
    }
    let mut result = result.map_err(|e| format!("{name}: {e}"))?;
    result.policy = policy;
    result.packaged = packaged_files(&wanted.packaged, &entry.status.inputs.packaged);
    print(name, &result, format)
}

/// Where a preview's packaged objects go: `previews/` in the installation's
/// bucket (which expires them after a day), never `templates/`.
fn preview_destination(aws: &Connection, store: &S3Store) -> stacksync::package::Destination {
    let region = aws
        .config
        .region()
        .map(|r| r.to_string())
        .unwrap_or_default();
    stacksync::package::Destination {
        bucket: store.bucket().to_owned(),
        url_base: template_url_base(
            store.bucket(),
            &region,
            aws.config.endpoint_url(),
            std::env::var("STACKSYNC_TEMPLATE_URL_BASE").ok().as_deref(),
        ),
        prefix: "previews/".into(),
    }
}

/// Stores a preview's packaged objects, each unless there already (their
/// keys name their content), made just before; the bucket made first with
/// an emulator.
async fn store_objects(
    aws: &Connection,
    name: &str,
    store: &S3Store,
    packaged: stacksync::package::Packaged,
) -> Result {
    if packaged.objects.is_empty() {
        return Ok(());
    }
    if aws.config.endpoint_url().is_some() {
        store.ensure_bucket().await.map_err(|e| {
            format!(
                "{name}: the bucket {:?} could not be made: {e}",
                store.bucket()
            )
        })?;
    }
    for object in &packaged.objects {
        let failed = |e: &PortError| put_failed(name, store.bucket(), &object.key, e);
        if store.exists(&object.key).await.map_err(|e| failed(&e))? {
            continue;
        }
        let bytes = packaged.bytes(object).map_err(|e| format!("{name}: {e}"))?;
        store
            .put(&object.key, bytes, object.content_type)
            .await
            .map_err(|e| failed(&e))?;
    }
    Ok(())
}

/// Where the preview's change set reads the template: in the request, or,
/// over CloudFormation's `TemplateBody` limit, put at `previews/<sha256>` in
/// the installation's bucket (its key returned, for the caller to delete
/// after). With an emulator endpoint the bucket is made when missing, as a
/// local run makes it (`wiring::sdk_steps`); in AWS it is the installation's,
/// and a missing one is said so.
async fn template_at(
    aws: &Connection,
    name: &str,
    store: &S3Store,
    template: &[u8],
) -> Result<(TemplateAt, Option<String>)> {
    if let Ok(body) = std::str::from_utf8(template)
        && body.len() <= MAX_TEMPLATE_BODY
    {
        return Ok((TemplateAt::Body(body.to_owned()), None));
    }
    let bucket = store.bucket();
    let key = stacksync::naming::preview_template_key(&sha256_hex(template));
    let endpoint = aws.config.endpoint_url();
    if endpoint.is_some() {
        store.ensure_bucket().await.map_err(|e| {
            format!(
                "{name}: the template is over {MAX_TEMPLATE_BODY} bytes, so the preview puts it \
                 in the bucket {bucket:?} first, which could not be made: {e}"
            )
        })?;
    }
    // A plain put: the key is the template's hash, and the object is deleted
    // after, so there is nothing to compare first (and no read to fail first).
    store
        .put(&key, template.to_vec(), "text/plain")
        .await
        .map_err(|e| put_failed(name, bucket, &key, &e))?;
    let region = aws
        .config
        .region()
        .map(|r| r.to_string())
        .unwrap_or_default();
    let base = template_url_base(
        bucket,
        &region,
        endpoint,
        std::env::var("STACKSYNC_TEMPLATE_URL_BASE").ok().as_deref(),
    );
    Ok((TemplateAt::Url(format!("{base}/{key}")), Some(key)))
}

/// Why the template could not be put: a missing bucket said in one line,
/// with where its name came from; any other failure as S3 gave it.
fn put_failed(name: &str, bucket: &str, key: &str, e: &PortError) -> String {
    // Not found, on a put: the bucket (`NoSuchBucket`).
    if matches!(e, PortError::NotFound(_)) {
        format!(
            "{name}: the installation's bucket {bucket:?} does not exist (the template is over \
             {MAX_TEMPLATE_BODY} bytes, so the preview puts it there first): name the installation \
             (--installation) or its bucket (--bucket or STACKSYNC_BUCKET; the installation stack's \
             output ArtifactBucketName)"
        )
    } else {
        format!(
            "{name}: the template is over {MAX_TEMPLATE_BODY} bytes, so the preview puts it at \
             s3://{bucket}/{key} first, which failed: {e}"
        )
    }
}

/// The local files the templates name, each said changed or not.
fn print_packaged(d: &Diff) {
    if !d.packaged.is_empty() {
        say!("  local files packaged:");
        for f in &d.packaged {
            let changed = if f.changed {
                "changed"
            } else {
                "as the last run"
            };
            say!("    {} ({}): {changed}", f.path, f.at);
        }
    }
}

fn print(name: &str, d: &Diff, format: Output) -> Result {
    if format != Output::Table {
        return print_structured(format, &json!({ "stack": name, "diff": d }));
    }
    let at = &d.revision[..d.revision.len().min(12)];
    let what = match &d.stack_status {
        None => format!("{} does not exist yet: a run creates it", d.stack_name),
        Some(status) => format!("{} ({status})", d.stack_name),
    };
    say!("{name}: {what}; the desired state at {at}:");
    if let Some(policy) = &d.policy {
        let verdict = if policy.passes() {
            ""
        } else {
            " (a run stops here: nothing is made)"
        };
        let mut lines = policy.lines().into_iter();
        if let Some(first) = lines.next() {
            say!("  {first}{verdict}");
        }
        for line in lines {
            say!("    {line}");
        }
    }
    if !d.checks.is_empty() {
        say!("  CloudFormation's checks:");
        for check in &d.checks {
            say!("    {}", check.line());
        }
    }
    print_packaged(d);
    if d.is_empty() {
        say!("  no changes");
        return Ok(());
    }
    if !d.changes.is_empty() {
        say!("  resources:");
        for c in &d.changes {
            let replacement = c
                .replacement
                .as_deref()
                .map(|r| format!("  replacement: {r}"))
                .unwrap_or_default();
            let changed = if c.changed.is_empty() {
                String::new()
            } else {
                format!("  ({})", c.changed.join(", "))
            };
            say!(
                "    {:<8} {} ({}){replacement}{changed}",
                c.action,
                c.logical_id,
                c.resource_type
            );
        }
    }
    for (title, rows) in [
        ("parameters", &d.parameters),
        ("tags", &d.tags),
        ("settings", &d.settings),
    ] {
        if rows.is_empty() {
            continue;
        }
        say!("  {title}:");
        for r in rows {
            let show = |v: &Option<String>| v.clone().unwrap_or_else(|| "(none)".into());
            say!("    {}: {} -> {}", r.name, show(&r.now), show(&r.desired));
        }
    }
    if d.beyond_resources {
        say!(
            "  no resource changes, but CloudFormation made a change set to run: what it changes \
             no resource shows (the template's outputs, say); a run executes it"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_bucket_is_said_plainly_and_any_other_failure_names_its_operation() {
        // As the adapter gives S3's NoSuchBucket (a not-found code).
        let missing = PortError::NotFound(
            "PutObject: NoSuchBucket: The specified bucket does not exist".into(),
        );
        let text = put_failed("orders", "acme-artifacts", "previews/ab", &missing);
        assert_eq!(
            text,
            "orders: the installation's bucket \"acme-artifacts\" does not exist (the template \
             is over 51200 bytes, so the preview puts it there first): name the installation \
             (--installation) or its bucket (--bucket or STACKSYNC_BUCKET; the installation \
             stack's output ArtifactBucketName)"
        );
        let denied = PortError::Refused("PutObject: AccessDenied: Access Denied".into());
        assert_eq!(
            put_failed("orders", "acme-artifacts", "previews/ab", &denied),
            "orders: the template is over 51200 bytes, so the preview puts it at \
             s3://acme-artifacts/previews/ab first, which failed: PutObject: AccessDenied: \
             Access Denied"
        );
    }
}
