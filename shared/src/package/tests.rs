use super::*;

fn destination() -> Destination {
    Destination {
        bucket: "bucket".into(),
        url_base: "https://bucket.s3.us-east-1.amazonaws.com".into(),
        prefix: "templates/".into(),
    }
}

fn files(list: &[(&str, &str)]) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = list
        .iter()
        .map(|(p, b)| ((*p).to_owned(), b.as_bytes().to_vec()))
        .collect();
    files.sort();
    files
}

const PARENT: &str = "\
Resources:
  Network:
    Type: AWS::CloudFormation::Stack
    Properties:
      TemplateURL: ./nested/network.yaml
  Fn:
    Type: AWS::Lambda::Function
    Properties:
      Runtime: python3.12
      Handler: index.handler
      Role: !GetAtt Role.Arn
      Code: src
  Layer:
    Type: AWS::Lambda::LayerVersion
    Properties:
      Content: layer/deps.zip
  Inline:
    Type: AWS::Lambda::Function
    Properties:
      Code:
        ZipFile: print(1)
  Remote:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: s3://elsewhere/code.zip
  Sub:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: !Sub 's3://${AWS::AccountId}/x.zip'
";

const NETWORK: &str = "\
Resources:
  Vpc:
    Type: AWS::EC2::VPC
    Properties:
      CidrBlock: 10.0.0.0/16
  Api:
    Type: AWS::Serverless::Api
    Properties:
      DefinitionUri: ../api/openapi.yaml
      StageName: prod
";

fn repo() -> Vec<(String, Vec<u8>)> {
    files(&[
        ("stack/parent.yaml", PARENT),
        ("stack/nested/network.yaml", NETWORK),
        ("stack/api/openapi.yaml", "openapi: 3.0.0"),
        ("stack/src/index.py", "def handler(e, c): return 1"),
        ("stack/src/lib/util.py", "X = 1"),
        ("stack/layer/deps.zip", "PK\x03\x04not really"),
        ("README.md", "unrelated"),
    ])
}

fn packaged() -> Packaged {
    let repo = repo();
    package("stack/parent.yaml", PARENT.as_bytes(), repo, &destination()).unwrap()
}

fn json(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap()
}

#[test]
fn the_paths_a_template_names_are_resolved_against_its_folder() {
    let found = references("stack/parent.yaml", PARENT.as_bytes()).unwrap();
    let paths: Vec<(&str, bool)> = found
        .iter()
        .map(|s| (s.path.as_str(), s.nested()))
        .collect();
    assert_eq!(
        paths,
        [
            ("stack/nested/network.yaml", true),
            ("stack/src", false),
            ("stack/layer/deps.zip", false)
        ],
        "an inline ZipFile, an s3:// URI and a !Sub are left alone"
    );
    let nested = references("stack/nested/network.yaml", NETWORK.as_bytes()).unwrap();
    assert_eq!(nested[0].path, "stack/api/openapi.yaml");
    assert_eq!(
        nested[0].at,
        "stack/nested/network.yaml: resource Api property DefinitionUri"
    );
}

#[test]
fn each_property_takes_the_form_the_cli_gives_it() {
    let out = packaged();
    let root = json(&out.template);
    let props = |id: &str| root["Resources"][id]["Properties"].clone();
    let code = props("Fn")["Code"].clone();
    assert_eq!(code["S3Bucket"], "bucket");
    assert!(
        code["S3Key"]
            .as_str()
            .unwrap()
            .starts_with("templates/packages/")
    );
    let url = props("Network")["TemplateURL"].as_str().unwrap().to_owned();
    assert!(
        url.starts_with("https://bucket.s3.us-east-1.amazonaws.com/templates/"),
        "{url}"
    );
    assert_eq!(props("Inline")["Code"]["ZipFile"], "print(1)");
    assert_eq!(props("Remote")["CodeUri"], "s3://elsewhere/code.zip");
    assert_eq!(
        props("Sub")["CodeUri"],
        serde_json::json!({"Fn::Sub": "s3://${AWS::AccountId}/x.zip"})
    );
    assert_eq!(
        props("Fn")["Role"],
        serde_json::json!({"Fn::GetAtt": ["Role", "Arn"]})
    );
    // The nested template is packaged too, and stored by its content.
    let key = url.rsplit_once(".com/").unwrap().1;
    let nested = out.objects.iter().find(|o| o.key == key).unwrap();
    assert_eq!(
        nested.key,
        destination().template_key(&sha256_hex(&out.bytes(nested).unwrap()))
    );
    let api = json(&out.bytes(nested).unwrap())["Resources"]["Api"]["Properties"]["DefinitionUri"]
        .clone();
    assert!(
        api.as_str()
            .unwrap()
            .starts_with("s3://bucket/templates/packages/"),
        "{api}"
    );
    // A zip is stored as it is; a folder is zipped.
    let layer = props("Layer")["Content"]["S3Key"]
        .as_str()
        .unwrap()
        .to_owned();
    let layer = out.objects.iter().find(|o| o.key == layer).unwrap();
    assert_eq!(out.bytes(layer).unwrap(), b"PK\x03\x04not really");
    let code = out.objects.iter().find(|o| o.key == code["S3Key"]).unwrap();
    let mut zipped =
        ::zip::ZipArchive::new(std::io::Cursor::new(out.bytes(code).unwrap())).unwrap();
    assert_eq!(zipped.len(), 2);
    assert_eq!(zipped.by_index(0).unwrap().name().unwrap(), "index.py");
    assert_eq!(zipped.by_index(1).unwrap().name().unwrap(), "lib/util.py");
    let recorded: Vec<&str> = out.artifacts.iter().map(|a| a.path.as_str()).collect();
    assert_eq!(
        recorded,
        [
            "stack/api/openapi.yaml",
            "stack/nested/network.yaml",
            "stack/src",
            "stack/layer/deps.zip"
        ]
    );
}

#[test]
fn packaging_is_deterministic_and_follows_content_only() {
    let a = packaged();
    assert_eq!(a, packaged());
    let mut changed = repo();
    for (path, bytes) in &mut changed {
        if path == "stack/src/index.py" {
            *bytes = b"def handler(e, c): return 2".to_vec();
        }
    }
    let b = package(
        "stack/parent.yaml",
        PARENT.as_bytes(),
        changed,
        &destination(),
    )
    .unwrap();
    assert_ne!(
        a.template, b.template,
        "the code's key changes the template"
    );
    let unrelated: Vec<_> = repo()
        .into_iter()
        .map(|(p, b)| {
            if p == "README.md" {
                (p, b"changed".to_vec())
            } else {
                (p, b)
            }
        })
        .collect();
    let c = package(
        "stack/parent.yaml",
        PARENT.as_bytes(),
        unrelated,
        &destination(),
    )
    .unwrap();
    assert_eq!(a.template, c.template);
}

#[test]
fn a_template_that_names_no_local_file_is_left_byte_for_byte() {
    let plain = b"Resources:\n  Q: {Type: AWS::SQS::Queue}  # a comment\n";
    let out = package("t.yaml", plain, Vec::new(), &destination()).unwrap();
    assert_eq!(out.template, plain);
    assert!(out.objects.is_empty() && out.artifacts.is_empty());
}

#[test]
fn the_same_folder_named_twice_is_one_object() {
    let template = "\
Resources:
  A: {Type: AWS::Serverless::Function, Properties: {CodeUri: src}}
  B: {Type: AWS::Serverless::Function, Properties: {CodeUri: ./src/}}
";
    let repo = files(&[("src/a.js", "1")]);
    let out = package("t.yaml", template.as_bytes(), repo.clone(), &destination()).unwrap();
    assert_eq!(out.objects.len(), 1);
    assert_eq!(out.artifacts.len(), 2);
}

#[test]
fn an_absent_code_property_packages_the_template_folder_unless_inline() {
    let template = "\
Resources:
  A: {Type: AWS::Serverless::Function, Properties: {Handler: a.h}}
  B: {Type: AWS::Serverless::Function, Properties: {InlineCode: 'x'}}
  C: {Type: AWS::Serverless::Api, Properties: {DefinitionBody: {}}}
";
    let found = references("fn/t.yaml", template.as_bytes()).unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(
        (found[0].path.as_str(), found[0].key.as_str()),
        ("fn", "CodeUri")
    );
    let err = package(
        "t.yaml",
        template.as_bytes(),
        files(&[("t.yaml", template)]),
        &destination(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("root folder"), "{err}");
}

#[test]
fn includes_foreach_metadata_and_nested_properties_are_found() {
    let template = r#"{
  "Metadata": {"AWS::ServerlessRepo::Application": {"ReadmeUrl": "README.md", "LicenseUrl": "s3://b/l"}},
  "Resources": {
    "Fn::ForEach::Queues": ["Name", ["A", "B"], {
      "Fn${Name}": {"Type": "AWS::Lambda::Function", "Properties": {"Code": "code/fn.py"}}
    }],
    "Job": {"Type": "AWS::Glue::Job", "Properties": {"Command": {"ScriptLocation": "jobs/etl.py"}}},
    "Api": {"Type": "AWS::ApiGateway::RestApi", "Properties": {
      "Fn::Transform": {"Name": "AWS::Include", "Parameters": {"Location": "snippets/api.yaml"}}}}
  }
}"#;
    let repo = files(&[
        ("README.md", "# app"),
        ("code/fn.py", "print(1)"),
        ("jobs/etl.py", "etl"),
        ("snippets/api.yaml", "a: 1"),
    ]);
    let out = package("t.json", template.as_bytes(), repo.clone(), &destination()).unwrap();
    let root = json(&out.template);
    assert!(
        root["Metadata"]["AWS::ServerlessRepo::Application"]["ReadmeUrl"]
            .as_str()
            .unwrap()
            .starts_with("s3://bucket/")
    );
    assert_eq!(
        root["Metadata"]["AWS::ServerlessRepo::Application"]["LicenseUrl"],
        "s3://b/l"
    );
    let job = &root["Resources"]["Job"]["Properties"]["Command"]["ScriptLocation"];
    assert!(job.as_str().unwrap().starts_with("s3://bucket/"), "{job}");
    let include =
        &root["Resources"]["Api"]["Properties"]["Fn::Transform"]["Parameters"]["Location"];
    assert!(
        include.as_str().unwrap().starts_with("s3://bucket/"),
        "{include}"
    );
    let code = &root["Resources"]["Fn::ForEach::Queues"][2]["Fn${Name}"]["Properties"]["Code"];
    assert_eq!(code["S3Bucket"], "bucket");
    // A lone file where a zip is wanted is zipped, named as it was.
    let object = out.objects.iter().find(|o| o.key == code["S3Key"]).unwrap();
    let mut zipped =
        ::zip::ZipArchive::new(std::io::Cursor::new(out.bytes(object).unwrap())).unwrap();
    assert_eq!(zipped.by_index(0).unwrap().name().unwrap(), "fn.py");
}

#[test]
fn hostile_and_broken_references_are_refused_with_where_they_are() {
    let with = |code: &str| {
        format!(
            "Resources:\n  Fn:\n    Type: AWS::Lambda::Function\n    Properties:\n      Code: {code}\n"
        )
    };
    let cases = [
        (with("../../etc"), "which leaves the source"),
        (with("/etc/passwd"), "is an absolute path"),
        (with("'C:\\x'"), "is an absolute path"),
        (
            with("missing"),
            "names stack/missing, which is not in the source",
        ),
    ];
    for (template, expected) in cases {
        let err = package(
            "stack/t.yaml",
            template.as_bytes(),
            Vec::new(),
            &destination(),
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains(expected), "{text}");
        assert!(
            text.contains("stack/t.yaml: resource Fn property Code"),
            "{text}"
        );
    }
}

#[test]
fn cycles_folders_and_broken_nested_templates_are_refused() {
    let nests = |to: &str| {
        format!(
            "Resources:\n  N:\n    Type: AWS::CloudFormation::Stack\n    Properties:\n      TemplateURL: {to}\n"
        )
    };
    let (a, b) = (nests("b.yaml"), nests("a.yaml"));
    let repo = files(&[("a.yaml", &a), ("b.yaml", &b), ("dir/x.yaml", "x")]);
    let err = package("a.yaml", a.as_bytes(), repo.clone(), &destination()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "nested templates form a cycle: a.yaml → b.yaml → a.yaml"
    );
    let err = package(
        "t.yaml",
        nests("dir").as_bytes(),
        repo.clone(),
        &destination(),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("a folder: a nested template must be a file"),
        "{err}"
    );
    let err = package(
        "t.yaml",
        nests("dir/x.yaml").as_bytes(),
        repo.clone(),
        &destination(),
    )
    .unwrap_err();
    assert!(
        err.to_string().starts_with(
            "nested template dir/x.yaml (named by t.yaml: resource N property TemplateURL)"
        ),
        "{err}"
    );
    let remote = nests("https://s3.amazonaws.com/b/k.yaml");
    let out = package("t.yaml", remote.as_bytes(), repo.clone(), &destination()).unwrap();
    assert_eq!(out.template, remote.as_bytes(), "a URL is left alone");
}

#[test]
fn nesting_deeper_than_the_limit_is_refused() {
    let mut repo = Vec::new();
    for i in 0..=MAX_NESTING {
        let body = format!(
            "Resources:\n  N:\n    Type: AWS::CloudFormation::Stack\n    Properties:\n      TemplateURL: t{}.yaml\n",
            i + 1
        );
        repo.push((format!("t{i}.yaml"), body.into_bytes()));
    }
    repo.sort();
    let root = repo.iter().find(|(p, _)| p == "t0.yaml").unwrap().1.clone();
    let err = package("t0.yaml", &root, repo.clone(), &destination()).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("nested templates go deeper than 10"),
        "{err}"
    );
}
