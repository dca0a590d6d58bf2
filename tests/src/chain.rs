//! A chain of three stacks passing outputs, network → database → app, in
//! one Git repository: the database reads the network's `VpcId`, the app
//! the database's `Endpoint` (and `dependsOn` the network). Shared by the
//! dependency tests and `scripts/bench chain`.

use crate::git::GitRepo;
use crate::unique_name;

/// The network: its `VpcId` output is `vpc-<Cidr>`; `Owner` changes no output.
pub const NETWORK: &str = "Parameters:
  Cidr: {Type: String}
  Owner: {Type: String}
Resources:
  Queue: {Type: AWS::SQS::Queue}
Outputs:
  VpcId:
    Value: !Join ['-', [vpc, !Ref Cidr]]
";
/// The database: its `Endpoint` output is `db.<Vpc>`.
pub const DATABASE: &str = "Parameters:
  Vpc: {Type: String}
Resources:
  Queue: {Type: AWS::SQS::Queue}
Outputs:
  Endpoint:
    Value: !Join ['.', [db, !Ref Vpc]]
";
/// The app: reads the database's endpoint.
pub const APP: &str = "Parameters:
  Endpoint: {Type: String}
Resources:
  Queue: {Type: AWS::SQS::Queue}
";

/// The three entries' names (they sort app, db, net: downstream first) and
/// their repository.
#[derive(Debug)]
pub struct Chain {
    pub repo: GitRepo,
    pub net: String,
    pub db: String,
    pub app: String,
}

impl Chain {
    /// The repository with the three templates committed.
    pub fn new(prefix: &str) -> Chain {
        let repo = GitRepo::new(prefix);
        repo.commit(
            &[
                ("net.yaml", NETWORK.as_bytes()),
                ("db.yaml", DATABASE.as_bytes()),
                ("app.yaml", APP.as_bytes()),
            ],
            "three stacks",
        );
        let id = unique_name(prefix).replace('-', "x");
        Chain {
            repo,
            net: format!("{id}net"),
            db: format!("{id}db"),
            app: format!("{id}app"),
        }
    }

    pub fn names(&self) -> [&str; 3] {
        [&self.net, &self.db, &self.app]
    }

    /// The stacks file, the network at `cidr` and `owner`.
    pub fn stacks(&self, cidr: &str, owner: &str) -> String {
        let (net, db, app) = (&self.net, &self.db, &self.app);
        format!(
            "stacks:\n  - name: {net}\n    source: {{git: '{url}', path: net.yaml}}\n    \
             parameters: {{Cidr: '{cidr}', Owner: {owner}}}\n  \
             - name: {db}\n    source: {{git: '{url}', path: db.yaml}}\n    \
             parameters: {{Vpc: {{fromStack: {net}, output: VpcId}}}}\n  \
             - name: {app}\n    source: {{git: '{url}', path: app.yaml}}\n    dependsOn: [{net}]\n    \
             parameters: {{Endpoint: {{fromStack: {db}, output: Endpoint}}}}\n",
            url = self.repo.file_url()
        )
    }

    /// A push that changes the network's output (`vpc-…` → `net-…`): its
    /// commit.
    pub fn push_new_output(&self) -> String {
        self.repo.commit(
            &[("net.yaml", NETWORK.replace("[vpc,", "[net,").as_bytes())],
            "rename",
        )
    }
}
