//! The desired state of a preview: the template and the parameters at a
//! ref, read and checked as a run reads them, and the parameters' values.

use std::collections::{BTreeMap, BTreeSet};

use crate::content::Wanted;
use crate::ports::{CloudFormationFactory, SourceFetcher, SourceLocation};
use crate::registry::Entries;
use crate::spec::{ParameterValue, StackSpec, ValueRef};
use crate::template;

/// The desired state at one revision of the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desired {
    pub revision: String,
    pub template: Vec<u8>,
    /// The parameters, file's and entry's, before their references are
    /// read ([`Desired::read_values`]).
    pub merged: BTreeMap<String, ParameterValue>,
    /// The parameters' values, once read (secrets among them: never shown).
    pub parameters: BTreeMap<String, String>,
    /// Parameters whose values a preview never shows: secrets', and those
    /// the template marks `NoEcho`.
    pub masked: BTreeSet<String>,
    /// The parameter file's tags (the entry's own are in the spec).
    pub file_tags: BTreeMap<String, String>,
}

/// Reads the desired state of `spec` at `reference` (default: the spec's
/// ref): the template and the parameter file, refused as a run refuses them.
pub async fn desired<S: SourceFetcher>(
    sources: &S,
    spec: &StackSpec,
    reference: Option<&str>,
) -> Result<Desired, String> {
    let source = SourceLocation::of(&spec.source);
    let reference = reference.or(spec.effective_ref()).unwrap_or_default();
    let revision = sources
        .resolve(&source, reference)
        .await
        .map_err(|e| e.to_string())?;
    let files = sources
        .fetch(&source, &revision, &Wanted::of(spec))
        .await
        .map_err(|e| e.to_string())?;
    let file = |path: &str| {
        files
            .iter()
            .find(|(p, _)| p == path)
            .map(|(_, bytes)| bytes.clone())
    };
    let at = &revision[..revision.len().min(12)];
    let (path, values_file) = match (&spec.parameter_file, &spec.source.deployment_file) {
        (_, Some(name)) if spec.source.path.is_empty() => {
            let bytes =
                file(name).ok_or_else(|| format!("deployment file {name} not found at {at}"))?;
            let path = template::deployment_template_path(name, &bytes)?;
            (path, Some((name.clone(), bytes)))
        }
        (Some(name), _) => {
            let bytes =
                file(name).ok_or_else(|| format!("parameter file {name} not found at {at}"))?;
            (spec.source.path.clone(), Some((name.clone(), bytes)))
        }
        (None, _) => (spec.source.path.clone(), None),
    };
    let template = match file(&path) {
        Some(bytes) => bytes,
        // A deployment file's template, fetched once its name is known.
        None if spec.source.path.is_empty() => sources
            .fetch(&source, &revision, &Wanted::of(spec).with_template(&path))
            .await
            .map_err(|e| e.to_string())?
            .into_iter()
            .find(|(p, _)| *p == path)
            .map(|(_, bytes)| bytes)
            .ok_or_else(|| format!("template {path} not found at {at}"))?,
        None => return Err(format!("template {path} not found at {at}")),
    };
    template::check_template(&path, &template).map_err(|e| format!("{e} (at {at})"))?;
    let from_file = match &values_file {
        Some((name, bytes)) => template::read_parameter_file(name, bytes, &path)?,
        None => template::FileValues::default(),
    };
    let merged = template::merge_parameters(from_file.parameters, spec);
    // Unreadable here: every value masked.
    let mut masked =
        crate::parameters::no_echo(&template).unwrap_or_else(|| merged.keys().cloned().collect());
    masked.extend(
        merged
            .iter()
            .filter(|(_, v)| v.reference().is_some_and(ValueRef::is_secret))
            .map(|(k, _)| k.clone()),
    );
    Ok(Desired {
        revision,
        merged,
        parameters: BTreeMap::new(),
        masked,
        file_tags: from_file.tags,
        template,
    })
}

impl Desired {
    /// Reads the parameters' references as a run reads them (secrets in
    /// the stack's account and region through `port`, other stacks'
    /// outputs from CloudFormation).
    pub async fn read_values<F, E>(
        mut self,
        factory: &F,
        registry: &E,
        port: &F::Port,
    ) -> Result<Self, String>
    where
        F: CloudFormationFactory,
        E: Entries,
    {
        let read = crate::reconcile::values::read_values(factory, registry, port, &self.merged)
            .await
            .map_err(|e| e.to_string())?;
        // A preview's change set shows its parameters as a run's would.
        crate::parameters::refuse_exposed_secrets(
            &read.secrets,
            crate::parameters::no_echo(&self.template).as_ref(),
        )?;
        self.parameters = read.values;
        Ok(self)
    }
}
