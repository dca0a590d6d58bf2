//! The properties `aws cloudformation package` rewrites, with its rules,
//! as the AWS CLI documents the command
//! (<https://docs.aws.amazon.com/cli/latest/reference/cloudformation/package.html>)
//! and as its code (`awscli/customizations/cloudformation/artifact_exporter.py`,
//! awscli 1.46) does them:
//!
//! - a property that is not a string (`!Sub`, `{S3Bucket: …}`, `ZipFile`)
//!   or is an `s3://` URI is left alone; for a nested template an
//!   `http://`/`https://` URL too;
//! - a folder is zipped; a file is uploaded as it is, except where the
//!   property wants a zip (Lambda code, layers, CodeCommit's initial code),
//!   where a file that is not a zip is zipped alone;
//! - where the property is absent, the template's folder is packaged, except
//!   for the properties marked `when_absent: false` (those with an inline
//!   alternative: `DefinitionBody`, `Definition`, a mapping template…);
//! - the result takes the property's form: an `s3://bucket/key` URI, a
//!   mapping of bucket and key, or (nested templates) an `https://` URL;
//! - `Fn::Transform` `AWS::Include` anywhere in a template: a local
//!   `Location` file is uploaded and named by its `s3://` URI;
//! - the `Metadata` of `AWS::ServerlessRepo::Application`: `LicenseUrl`
//!   and `ReadmeUrl`.

/// How the property names the stored object once packaged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// `s3://bucket/key`.
    S3Uri,
    /// A mapping of the bucket and the key under these names.
    Mapping {
        bucket: &'static str,
        key: &'static str,
    },
    /// A nested template: packaged itself, stored, and named by its
    /// `https://` URL (path style, as the CLI writes it).
    Template,
}

/// One property the packager rewrites.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub resource_type: &'static str,
    /// The property, dotted when nested (`Command.ScriptLocation`).
    pub property: &'static str,
    pub form: Form,
    /// A file that is not a zip is zipped alone.
    pub force_zip: bool,
    /// Absent: the template's folder is packaged.
    pub when_absent: bool,
}

const fn rule(resource_type: &'static str, property: &'static str, form: Form) -> Rule {
    Rule {
        resource_type,
        property,
        form,
        force_zip: false,
        when_absent: false,
    }
}

const fn zipped(rule: Rule) -> Rule {
    Rule {
        force_zip: true,
        ..rule
    }
}

const fn or_folder(rule: Rule) -> Rule {
    Rule {
        when_absent: true,
        ..rule
    }
}

const S3_CODE: Form = Form::Mapping {
    bucket: "S3Bucket",
    key: "S3Key",
};
const BUCKET_KEY: Form = Form::Mapping {
    bucket: "Bucket",
    key: "Key",
};

/// Every property packaged, in the CLI's order.
pub const RULES: &[Rule] = &[
    or_folder(zipped(rule(
        "AWS::Serverless::Function",
        "CodeUri",
        Form::S3Uri,
    ))),
    rule("AWS::Serverless::Api", "DefinitionUri", Form::S3Uri),
    rule(
        "AWS::AppSync::GraphQLSchema",
        "DefinitionS3Location",
        Form::S3Uri,
    ),
    rule(
        "AWS::AppSync::Resolver",
        "RequestMappingTemplateS3Location",
        Form::S3Uri,
    ),
    rule(
        "AWS::AppSync::Resolver",
        "ResponseMappingTemplateS3Location",
        Form::S3Uri,
    ),
    rule(
        "AWS::AppSync::FunctionConfiguration",
        "RequestMappingTemplateS3Location",
        Form::S3Uri,
    ),
    rule(
        "AWS::AppSync::FunctionConfiguration",
        "ResponseMappingTemplateS3Location",
        Form::S3Uri,
    ),
    rule("AWS::ApiGateway::RestApi", "BodyS3Location", BUCKET_KEY),
    or_folder(zipped(rule("AWS::Lambda::Function", "Code", S3_CODE))),
    or_folder(rule(
        "AWS::ElasticBeanstalk::ApplicationVersion",
        "SourceBundle",
        S3_CODE,
    )),
    rule("AWS::CloudFormation::Stack", "TemplateURL", Form::Template),
    rule("AWS::Serverless::Application", "Location", Form::Template),
    or_folder(zipped(rule(
        "AWS::Serverless::LayerVersion",
        "ContentUri",
        Form::S3Uri,
    ))),
    or_folder(zipped(rule(
        "AWS::Lambda::LayerVersion",
        "Content",
        S3_CODE,
    ))),
    rule("AWS::Glue::Job", "Command.ScriptLocation", Form::S3Uri),
    rule(
        "AWS::StepFunctions::StateMachine",
        "DefinitionS3Location",
        BUCKET_KEY,
    ),
    rule("AWS::Serverless::StateMachine", "DefinitionUri", BUCKET_KEY),
    zipped(rule("AWS::CodeCommit::Repository", "Code.S3", BUCKET_KEY)),
];

/// The `Metadata` entries packaged: (metadata type, property).
pub const METADATA: &[(&str, &str)] = &[
    ("AWS::ServerlessRepo::Application", "LicenseUrl"),
    ("AWS::ServerlessRepo::Application", "ReadmeUrl"),
];

/// The rules of a resource type.
pub fn of(resource_type: &str) -> impl Iterator<Item = &'static Rule> + '_ {
    RULES
        .iter()
        .filter(move |r| r.resource_type == resource_type)
}
