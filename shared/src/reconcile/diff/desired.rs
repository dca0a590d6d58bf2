//! The desired state of a preview: the template and the parameters at a
//! ref, read and checked as a run reads them (`reconcile::desired`), and
//! the parameters' values.

use std::collections::{BTreeMap, BTreeSet};

use crate::ports::{CloudFormationFactory, SourceFetcher, SourceLocation};
use crate::reconcile::desired::{self, FetchFailed};
use crate::registry::Entries;
use crate::spec::{ParameterValue, StackSpec, ValueRef};
use crate::template;

/// The desired state at one revision of the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desired {
    pub revision: String,
    /// The template's path (`source.path`, or the one the deployment file
    /// names).
    pub template_path: String,
    pub template: Vec<u8>,
    /// The parameters the parameter (or deployment) file gives, before the
    /// entry's own are merged over them.
    pub from_file: BTreeMap<String, String>,
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
    /// What a run hashes of each parameter (a secret's hash, never its
    /// value), once read: [`Desired::desired_hash`].
    pub parameter_hashes: BTreeMap<String, String>,
    /// The files fetched, kept only while the template names local files
    /// still to package ([`Desired::package`]).
    pub files: Vec<(String, Vec<u8>)>,
    /// What [`Desired::package`] packaged.
    pub packaged: Vec<crate::package::Artifact>,
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
    let files = desired::fetch(sources, spec, &revision)
        .await
        .map_err(|e| match e {
            FetchFailed::Source(e) => e.to_string(),
            FetchFailed::Invalid(e) => e,
        })?;
    let at = format!("at {}", &revision[..revision.len().min(12)]);
    let read = desired::read(spec, desired::among(&files), &at)?;
    let names_files = !crate::package::references(&read.template_path, &read.template)
        .map_err(|e| format!("{e} ({at})"))?
        .is_empty();
    let template = read.template;
    let merged = template::merge_parameters(read.from_file.parameters.clone(), spec);
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
        template_path: read.template_path,
        from_file: read.from_file.parameters,
        merged,
        parameters: BTreeMap::new(),
        masked,
        file_tags: read.from_file.tags,
        template,
        parameter_hashes: BTreeMap::new(),
        files: if names_files { files } else { Vec::new() },
        packaged: Vec::new(),
    })
}

impl Desired {
    /// Packages the template as a run would ([`crate::package`]), for
    /// `destination`: the template becomes the packaged one (what the
    /// preview's change set and Guard see); the objects to store first are
    /// in what is returned (none when the template names no local file).
    pub fn package(
        &mut self,
        destination: &crate::package::Destination,
    ) -> Result<crate::package::Packaged, String> {
        if self.files.is_empty() {
            return Ok(crate::package::Packaged::as_is(self.template.clone()));
        }
        let files = std::mem::take(&mut self.files);
        let packaged =
            crate::package::package(&self.template_path, &self.template, files, destination)
                .map_err(|e| e.to_string())?;
        self.template.clone_from(&packaged.template);
        self.packaged.clone_from(&packaged.artifacts);
        Ok(packaged)
    }

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
        self.parameter_hashes = crate::parameters::hash_inputs(&read.stored);
        self.parameters = read.values;
        Ok(self)
    }

    /// The values given as they are, without reading any reference (no
    /// AWS): a reference's value is masked (`stacksync validate --policy`).
    pub fn with_literal_values(mut self) -> Self {
        for (name, value) in &self.merged {
            match value.text() {
                Some(text) => {
                    self.parameters.insert(name.clone(), text.to_owned());
                }
                None => {
                    self.parameters.insert(name.clone(), "****".to_owned());
                    self.masked.insert(name.clone());
                }
            }
        }
        self
    }

    /// The Guard check a run makes of this desired state
    /// (`crate::guard`): the template as written, the values read (those
    /// masked are not given) and the tags.
    pub fn policy_report(
        &self,
        spec: &StackSpec,
        sets: &[crate::guard::RuleSet],
    ) -> Result<crate::guard::Report, crate::guard::PolicyError> {
        let input = crate::guard::input(
            &self.template,
            spec.effective_stack_name(),
            &self.parameters,
            &self.masked,
            &template::merge_tags(self.file_tags.clone(), spec),
        )?;
        crate::guard::check(sets, &input)
    }

    /// The desired state's hash as a run's template-upload computes it
    /// (`template::desired_hash`): equal, and the run asks CloudFormation
    /// for exactly what this preview asked. After [`Desired::read_values`].
    pub fn desired_hash(&self, spec: &StackSpec) -> String {
        template::desired_hash(
            &crate::hash::sha256_hex(&self.template),
            &self.parameter_hashes,
            &template::merge_tags(self.file_tags.clone(), spec),
            spec,
        )
    }
}
