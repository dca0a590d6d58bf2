// The stacksync stack: the same architecture as ../../template.yaml (SAM).
//
// The registry (DynamoDB), the artifact bucket (S3, with its access-log
// bucket), the reconcile step functions (Rust on Lambda, built by
// cargo-lambda), the reconcile state machine (Step Functions), the triggers
// (the Git webhook behind a Function URL, the scheduler and the drift function
// on an EventBridge schedule, the events function behind its EventBridge rules),
// the answer function (approvals, behind an IAM-authorised Function URL) and the alarms.
// Every function is one row of FUNCTIONS below: its binary, its description
// and what its role may do. A role holds exactly the statements of its row
// (README "IAM by function", the same as template.yaml), plus writing its own
// log group and X-Ray traces.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Aws, CfnOutput, Duration, Lazy, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as cloudwatchActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { RustFunction } from 'cargo-lambda-cdk';
import { NagSuppressions, type NagPackSuppression } from 'cdk-nag';
import type { Construct } from 'constructs';

/** The values template.yaml's `LogRetentionDays` parameter allows. */
export const LOG_RETENTION_DAYS = [
  1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653,
] as const;

export type LambdaArchitecture = 'arm64' | 'x86_64';

/** template.yaml's `ScheduleExpression` AllowedPattern: an EventBridge rate(...) or cron(...) expression. */
export const SCHEDULE_EXPRESSION = /^(rate\([1-9][0-9]* (minute|minutes|hour|hours|day|days)\)|cron\([^()]+\))$/;

/** template.yaml's `DriftReadPolicy` AllowedPattern: an AWS managed policy's name (its path allowed), or none. */
export const DRIFT_READ_POLICY = /^(none|[A-Za-z0-9+=,.@_/-]{1,128})$/;

/**
 * An approver (`approvers`): an IAM principal ARN pattern, `arn:PARTITION:iam::ACCOUNT:role/NAME` (without the role's
 * path, which its sessions' ARNs do not have), `arn:PARTITION:iam::ACCOUNT:user/NAME` or
 * `arn:PARTITION:sts::ACCOUNT:assumed-role/ROLE/SESSION`, `*` and `?` allowed in the name: what the answer function
 * accepts in `STACKSYNC_APPROVERS` (shared/src/approvers.rs `check_pattern`), and template.yaml's `Approvers`
 * AllowedPattern (the same expression, which also allows an empty list).
 */
export const APPROVER_PATTERN = /^arn:aws[a-z-]*:(iam::[0-9]{12}:(role\/[A-Za-z0-9+=,.@_*?-]+|user\/[A-Za-z0-9+=,.@_\/*?-]+)|sts::[0-9]{12}:assumed-role\/[A-Za-z0-9+=,.@_\/*?-]+)$/;

export interface StackSyncProps extends StackProps {
  /**
   * Only stacks whose names start with this prefix may be managed; scopes
   * every CloudFormation permission to `stack/<prefix>*\/*`, and runs refuse
   * other names. `''` (on purpose): any stack of this account (stacksync
   * still touches only the stacks it made or an entry adopts).
   * @default 'stacksync-'
   */
  readonly stackNamePrefix?: string;
  /**
   * Every entry must name its service role (`roleArn`), one of
   * `cloudFormationRoleArns`.
   * @default true
   */
  readonly requireRoleArn?: boolean;
  /**
   * Service roles CloudFormation may be given (the stacks' `roleArn`); the
   * functions may pass only these (`iam:PassRole`, to CloudFormation only).
   * @default none
   */
  readonly cloudFormationRoleArns?: string[];
  /**
   * Roles in other accounts the functions may assume (the stacks'
   * `assumeRoleArn`), tagging the session; each may read by version the
   * templates of its own account's stacks only.
   * @default none (same account only)
   */
  readonly targetAccountRoleArns?: string[];
  /**
   * The Secrets Manager secret the webhook checks signatures with (the plain
   * secret, or JSON `{"current": ..., "previous": ...}` while rotating): a
   * secret ARN, no wildcards. The webhook role may read only this secret.
   * @default none (the webhook refuses every delivery)
   */
  readonly webhookSecretArn?: string;
  /**
   * The SNS topic the alarms notify (failed reconciles, function errors,
   * throttles, the webhook's refused requests and unreadable secret,
   * unreadable registry items).
   * @default none: no alarms (they would notify no one, and cost $0.10 per
   * alarm metric a month: 17 metrics, $1.70)
   */
  readonly alarmTopicArn?: string;
  /**
   * The EventBridge bus (of this account and region, by name) every run's events go to: source `stacksync`,
   * detail types Reconcile Started, Reconcile Succeeded, Reconcile Failed, Approval Requested, Change Set Approved,
   * Change Set Rejected, and the drift function's Drift Detected, Drift Cleared, Drift Not Cleared. 'none': no events.
   * @default 'default' (the account's default bus)
   */
  readonly eventBusName?: string;
  /**
   * An example rule: failed runs, rejections, change sets awaiting approval and drift found go to this SNS topic (its policy
   * must let events.amazonaws.com publish).
   * @default none (no rule)
   */
  readonly notificationTopicArn?: string;
  /**
   * How long function, state machine and S3 access logs are kept.
   * @default 30
   */
  readonly logRetentionDays?: number;
  /**
   * How often the scheduler looks at the due stacks and checks the sources
   * they follow, and the drift function starts and reads drift detections:
   * an EventBridge `rate(...)` or `cron(...)` expression.
   * @default 'rate(5 minutes)'
   */
  readonly scheduleExpression?: string;
  /**
   * The most reconciles one scheduler run starts (1 to 1000); the rest are
   * due at the next run, so CloudFormation is never flooded.
   * @default 50
   */
  readonly maxStartsPerRun?: number;
  /**
   * The most drift detections running at once per account and region (1 to
   * 100); the stacks due wait for a free place (none is dropped).
   * @default 10
   */
  readonly maxDriftDetections?: number;
  /**
   * The AWS managed policy (its name, such as `SecurityAudit`,
   * `ReadOnlyAccess` or `job-function/ViewOnlyAccess`) attached to the drift
   * function's role so that drift detection can read the stacks' resources in
   * this account: CloudFormation reads them with the caller's permissions.
   * `SecurityAudit` (the default) reads configuration, not data, and is
   * completed with the read actions it lacks for common resource types (the
   * customer managed policy `DriftReadGapsPolicy`, `DRIFT_READ_GAPS`);
   * `ReadOnlyAccess` reads data too (S3 objects, DynamoDB items); 'none':
   * attach nothing (a resource it cannot read makes the detection fail).
   * Stacks in other accounts are read with their `assumeRoleArn`.
   * @default 'SecurityAudit'
   */
  readonly driftReadPolicy?: string;
  /**
   * Who may approve or reject a change set that waits (approval gates), for entries that name no approvers of their
   * own: IAM principal ARN patterns (`arn:aws:iam::ACCOUNT:role/NAME`, `...:user/NAME`; `*` and `?` allowed; an
   * assumed role's sessions match their role). Checked by the answer function against the caller AWS verified.
   * @default none (only entries' own approvers)
   */
  readonly approvers?: string[];
  /**
   * The buckets of the stacks' S3 sources: artifact-fetch and the scheduler may read their objects (any key, any
   * version), and only their "Object Created" events reach the events function (the buckets must send events to
   * EventBridge).
   * @default none (no S3 source can be read, and no S3 rule)
   */
  readonly sourceBucketNames?: string[];
  /**
   * Secrets Manager secrets holding Git credentials (the stacks' `source.credentialsSecret`): artifact-fetch and
   * the scheduler may read these only. Secret ARNs; IAM wildcards (`*`, `?`) are allowed in the name, such as
   * `stacksync/git/*` or `git-token-??????` (Secrets Manager appends six random characters to a secret's name).
   * @default none (no Git credentials from Secrets Manager)
   */
  readonly sourceSecretArns?: string[];
  /**
   * SSM SecureString parameters holding Git credentials, as `sourceSecretArns`: parameter ARNs
   * (`arn:PARTITION:ssm:REGION:ACCOUNT:parameter/NAME`), wildcards allowed in the name.
   * @default none (no Git credentials from SSM)
   */
  readonly sourceParameterArns?: string[];
  /**
   * Secrets Manager secrets the stacks' parameters may read (`{secret: ARN, key: FIELD}` in stacks.yaml):
   * template-upload, change-set and poll-status may read these only. Secret ARNs, IAM wildcards (`*`, `?`) allowed
   * in the name, as `sourceSecretArns`.
   * @default none (no parameter from Secrets Manager)
   */
  readonly valueSecretArns?: string[];
  /**
   * SSM parameters (String, StringList, SecureString) the stacks' parameters may read (`{ssm: NAME}` in
   * stacks.yaml), as `valueSecretArns`: parameter ARNs (`arn:PARTITION:ssm:REGION:ACCOUNT:parameter/NAME`),
   * wildcards allowed in the name.
   * @default none (no parameter from SSM)
   */
  readonly valueParameterArns?: string[];
  /**
   * CodeCommit repositories the stacks' sources name: artifact-fetch and the scheduler pull them with their own
   * role (`codecommit:GitPull`), no secret needed. Repository ARNs, wildcards allowed in the name.
   * @default none (no CodeCommit source can be read)
   */
  readonly codeCommitRepositoryArns?: string[];
  /**
   * The most webhook invocations at once, reserved from the account's Lambda concurrency: a flood of requests to
   * the public URL cannot take the concurrency the reconcile steps need. 0: no reservation (for accounts whose
   * concurrency quota is too low to reserve any).
   * @default 10
   */
  readonly webhookReservedConcurrency?: number;
  /**
   * The most events-function invocations at once (EventBridge retries the throttled ones). 0: no reservation.
   * @default 5
   */
  readonly eventsReservedConcurrency?: number;
  /**
   * Lambda architecture of the functions. x86_64 by default, as in
   * template.yaml: arm64 needs the aarch64-unknown-linux-gnu standard library
   * (`rustup target add`) besides cargo-lambda and zig.
   * @default 'x86_64'
   */
  readonly architecture?: LambdaArchitecture;
  /**
   * The Cargo workspace (directory holding the root Cargo.toml and
   * statemachine/).
   * @default the first directory above this file whose Cargo.toml has [workspace]
   */
  readonly workspaceRoot?: string;
  /**
   * The Cargo profile the functions are built with.
   * @default 'release' (Cargo.toml: opt-level "s", stripped; what `sam build` uses too)
   */
  readonly cargoProfile?: string;
}

/** What a row of FUNCTIONS may ask for; each method is one statement of template.yaml. */
export interface Permissions {
  /**
   * `ReadRegistry`: dynamodb:GetItem on the registry table, only items whose key starts with one of
   * `RUN_KEY_PREFIXES` (`ForAllValues:StringLike` on `dynamodb:LeadingKeys`), read whole. What a step writes is
   * `keys('RecordRun', ...)`.
   */
  readRegistry(): iam.PolicyStatement;
  /**
   * dynamodb:GetItem on the registry table under a Sid of the row's own, only items whose key starts with one of
   * `keyPrefixes` (`ForAllValues:StringLike` on `dynamodb:LeadingKeys`, each prefix + `*`), read whole.
   */
  readKeys(sid: string, keyPrefixes: string[]): iam.PolicyStatement;
  /** These object actions on `<prefix>/*` of the artifact bucket, for each prefix. */
  objects(sid: string, actions: string[], prefixes: string[]): iam.PolicyStatement;
  /** `s3:ListBucket` on the bucket, so that a missing object reads as 404 rather than 403. */
  listBucket(sid: string): iam.PolicyStatement;
  /** `Stacks`: these CloudFormation actions on `stack/<stackNamePrefix>*\/*` (any region, this account). */
  stacks(...actions: string[]): iam.PolicyStatement;
  /**
   * `OwnStacks`: these CloudFormation actions on the same stacks, unless another installation tagged the stack
   * as its own (`StringEqualsIfExists` on `aws:ResourceTag/stacksync:installation`: this one's, or untagged).
   */
  ownStacks(...actions: string[]): iam.PolicyStatement;
  /**
   * `ChangeSets`: cloudformation:CreateChangeSet on the same stacks, only tagging the stack as this installation's
   * (`aws:RequestTag/stacksync:installation`), and not on another installation's.
   */
  changeSets(): iam.PolicyStatement;
  /** `ListStacks`: cloudformation:ListStacks, which has no resource-level permission (resource `*`). */
  listStacks(): iam.PolicyStatement;
  /** `Drift`: cloudformation:DetectStackDrift and DescribeStackResourceDrifts on the same stacks as `stacks`. */
  drift(): iam.PolicyStatement;
  /**
   * `DriftDetections`: cloudformation:DescribeStackDriftDetectionStatus, which names a detection id and has no
   * resource-level permission (resource `*`).
   */
  driftDetections(): iam.PolicyStatement;
  /** `Transforms`: cloudformation:CreateChangeSet on every AWS-owned transform (`arn:PARTITION:cloudformation:*:aws:transform/*`). */
  transforms(): iam.PolicyStatement;
  /** `PassServiceRoles`: iam:PassRole on the configured service roles, to CloudFormation only; none when none are configured. */
  passServiceRoles(): iam.PolicyStatement[];
  /**
   * `TargetAccounts`: sts:AssumeRole and sts:TagSession (the sessions are tagged) on the configured
   * target-account roles; none when none are configured.
   */
  assumeTargetRoles(): iam.PolicyStatement[];
  /** `Events`: events:PutEvents on the `eventBusName` bus, source `stacksync` only; none with 'none'. */
  putEvents(): iam.PolicyStatement[];
  /** These DynamoDB actions on the registry table, under a Sid of the row's own, unconditioned (`keys`: by key prefix). */
  table(sid: string, ...actions: string[]): iam.PolicyStatement;
  /** Sid Deliveries: dynamodb:PutItem on the table, only items whose key starts with `delivery#`, only their key and expiry. */
  deliveries(): iam.PolicyStatement;
  /**
   * These DynamoDB actions on the table, only on items whose key starts with
   * one of `keyPrefixes` (`ForAllValues:StringLike` on `dynamodb:LeadingKeys`, each prefix + `*`), naming only
   * `attributes` (`ForAllValues:StringEquals` on `dynamodb:Attributes`; writes return nothing of the item).
   */
  keys(sid: string, actions: string[], keyPrefixes: string[], attributes: string[]): iam.PolicyStatement;
  /**
   * `SourceIndex`: dynamodb:Query on the `by-source` index, reading only what a trigger needs of a source's
   * followers (`FOLLOWER_ATTRIBUTES`, `dynamodb:Select` SPECIFIC_ATTRIBUTES): nothing of their specs.
   */
  followers(): iam.PolicyStatement;
  /** These DynamoDB actions on `<table ARN>/index/<indexName>`, one of the registry's GSIs. */
  index(sid: string, indexName: string, ...actions: string[]): iam.PolicyStatement;
  /**
   * `StartReconcile`: states:StartExecution on the reconcile state machine.
   * Only for rows with `reconcileStep: false` (the steps are made before the machine).
   */
  startReconcile(): iam.PolicyStatement;
  /** `Secret`: secretsmanager:GetSecretValue on the `webhookSecretArn` secret; none when none is configured. */
  webhookSecret(): iam.PolicyStatement[];
  /** `SourceSecrets`: secretsmanager:GetSecretValue on the `sourceSecretArns` (Git credentials); none without them. */
  sourceSecrets(): iam.PolicyStatement[];
  /** `SourceParameters`: ssm:GetParameter on the `sourceParameterArns` (Git credentials); none without them. */
  sourceParameters(): iam.PolicyStatement[];
  /** `ValueSecrets`: secretsmanager:GetSecretValue on the `valueSecretArns` (the stacks' parameters); none without them. */
  valueSecrets(): iam.PolicyStatement[];
  /** `ValueParameters`: ssm:GetParameter on the `valueParameterArns` (the stacks' parameters); none without them. */
  valueParameters(): iam.PolicyStatement[];
  /** `SourceObjects`: s3:GetObject and s3:GetObjectVersion on every object of the `sourceBucketNames`; none without them. */
  sourceObjects(): iam.PolicyStatement[];
  /** `SourceBuckets`: s3:ListBucket on the `sourceBucketNames`, so that a missing object reads as 404 rather than 403; none without them. */
  sourceBuckets(): iam.PolicyStatement[];
  /** `CodeCommit`: codecommit:GitPull on the `codeCommitRepositoryArns`; none without them. */
  codeCommit(): iam.PolicyStatement[];
  /**
   * `AnswerTokens`: states:SendTaskSuccess and states:SendTaskFailure, which name a task token and have no
   * resource-level permission (resource `*`): the tokens' secrecy (the bucket's policy) is what limits them.
   */
  answerTokens(): iam.PolicyStatement;
}

/** Values of the stack a row may put in its function's environment. */
export interface StackValues {
  /**
   * The reconcile state machine's ARN. Only for rows with
   * `reconcileStep: false` (the steps are made before the machine).
   */
  readonly stateMachineArn: string;
  /** The `webhookSecretArn` prop, or '' without one (as template.yaml's `WebhookSecretArn` default). */
  readonly webhookSecretArn: string;
  /** The `scheduleExpression` prop (template.yaml's `ScheduleExpression`). */
  readonly scheduleExpression: string;
  /** The `maxStartsPerRun` prop, as text (template.yaml's `MaxStartsPerRun`). */
  readonly maxStartsPerRun: string;
  /** The `maxDriftDetections` prop, as text (template.yaml's `MaxDriftDetections`). */
  readonly maxDriftDetections: string;
  /** The `driftReadPolicy` prop: an AWS managed policy's name, or 'none' (template.yaml's `DriftReadPolicy`). */
  readonly driftReadPolicy: string;
  /** The `approvers` prop (template.yaml's `Approvers`). */
  readonly approvers: string[];
  /**
   * The answer function's IAM-authorised Function URL (template.yaml's `!GetAtt AnswerFunctionUrl.FunctionUrl`),
   * resolved when the stack is synthesized: a reconcile step (the approval function) is made before it.
   */
  readonly answerUrl: string;
  /** `arn:PARTITION:cloudformation:REGION:ACCOUNT:stack/<stackNamePrefix>`: the ARNs of the stacks this installation may manage start so. */
  readonly stackArnPrefix: string;
  /** The `sourceBucketNames` prop (template.yaml's `SourceBucketNames`). */
  readonly sourceBucketNames: string[];
  /** The `webhookReservedConcurrency` and `eventsReservedConcurrency` props. */
  readonly webhookReservedConcurrency: number;
  readonly eventsReservedConcurrency: number;
}

/**
 * An EventBridge rule (default bus) whose one target is the row's function;
 * the function may be invoked by EventBridge from this rule only. Exactly one
 * of `schedule` and `eventPattern`.
 */
export interface TriggerRule {
  readonly description?: string;
  readonly schedule?: events.Schedule;
  readonly eventPattern?: events.EventPattern;
}

export interface FunctionSpec {
  /** Construct id stem: `<id>Function`, `<id>Role`, `<id>Logs`; the state machine placeholder is `${<id>FunctionArn}`. */
  readonly id: string;
  /** The Cargo binary (`[[bin]] name`). */
  readonly binary: string;
  readonly description: string;
  /**
   * Its id in an errors alarm's metric math expression: FunctionErrorsAlarm for a reconcile step,
   * TriggerErrorsAlarm for the others (an alarm's math expression takes at most 10 metrics, CloudWatch's limit, so
   * template.yaml splits them so); none: in neither.
   */
  readonly errorsMetricId?: string;
  /** Whether statemachine/reconcile.asl.json invokes it (the trigger functions are not invoked by it). */
  readonly reconcileStep: boolean;
  /** Its role's statements, beyond its own logs and traces. */
  readonly permissions: (p: Permissions) => iam.PolicyStatement[];
  /** The function's timeout in seconds (template.yaml's Globals: 300). */
  readonly timeoutSeconds?: number;
  /** Environment variables beyond STACKSYNC_TABLE, STACKSYNC_BUCKET and STACKSYNC_LOG. */
  readonly environment?: (v: StackValues) => Record<string, string>;
  /**
   * A Lambda Function URL with auth type NONE (public: the function must
   * authenticate each request itself), and the output `<id>Url` with this
   * description.
   */
  readonly publicUrl?: { readonly outputDescription: string };
  /**
   * A Lambda Function URL with auth type AWS_IAM (AWS verifies each caller's signature and IAM permission; no
   * public permission is made), and the output `<id>Url` with this description.
   */
  readonly iamUrl?: { readonly outputDescription: string };
  /**
   * EventBridge rules that invoke the function, by name: the rule's construct
   * id is `<id>Function<name>`, as SAM names the rule of the function's event `<name>`.
   */
  readonly rules?: (v: StackValues) => Record<string, TriggerRule>;
  /** Concurrency reserved for the function (template.yaml's `ReservedConcurrentExecutions`); 0 or none: no reservation. */
  readonly reservedConcurrency?: (v: StackValues) => number;
  /**
   * AWS managed policies attached to the role (template.yaml's `Policies`
   * naming a policy ARN), by name (`arn:PARTITION:iam::aws:policy/<name>`),
   * and why the role needs them: cdk-nag's AwsSolutions-IAM4 finding is
   * suppressed with that reason.
   */
  readonly managedPolicies?: { readonly names: (v: StackValues) => string[]; readonly reason: string };
  /**
   * Customer managed policies made for the role and attached to it (template.yaml's `AWS::IAM::ManagedPolicy`
   * resources a function's `Policies` name by `!Ref`), by construct id; none when the row returns none (their
   * template.yaml condition does not hold).
   */
  readonly customerManagedPolicies?: (v: StackValues) => Record<string, CustomerManagedPolicy>;
}

/** A customer managed policy of a row (`customerManagedPolicies`). */
export interface CustomerManagedPolicy {
  /** Its description, as template.yaml's. */
  readonly description: string;
  readonly statements: iam.PolicyStatement[];
  /** Why its wildcard resources: the reason of their AwsSolutions-IAM5 suppressions. */
  readonly wildcardReason: string;
}

/**
 * What a trigger may read of a source's followers through `by-source` (shared/src/registry/followers.rs, and the
 * index's key): nothing of their specs.
 */
export const FOLLOWER_ATTRIBUTES = [
  'pk',
  'sourceKey',
  'name',
  'suspended',
  'specSuspend',
  'deletionRequestedAt',
  'leaseExpiresAt',
  'status',
  'watch',
];

/**
 * The items a step reads (`readRegistry`): its run's entry (`stack#`) and what a run records of the stacks it
 * depends on (`dependents#`).
 */
export const RUN_KEY_PREFIXES = ['stack#', 'dependents#'];

/**
 * What a step writes of its run's entry (`RecordRun`): its status, its hold (the lease), when it is due; never its
 * spec (README "Security model"). artifact-fetch also writes the `names` of `dependents#` items.
 */
export const RUN_ATTRIBUTES = ['pk', 'status', 'watch', 'leaseOwner', 'leaseExpiresAt', 'leaseTakenAt', 'nextReconcileAt'];

/** The tag naming the installation that made a stack (shared/src/ownership.rs). */
export const INSTALLATION_TAG = 'stacksync:installation';

/**
 * The read actions of common resource types that the AWS managed policy SecurityAudit lacks (from the types'
 * CloudFormation read handlers), on `*`: template.yaml's `DriftReadGapsPolicy`, statement
 * `ReadHandlersBeyondSecurityAudit`. Attached to the drift function with `driftReadPolicy` SecurityAudit only.
 */
export const DRIFT_READ_GAPS = [
  'lambda:GetFunction',
  'lambda:GetFunctionRecursionConfig',
  'lambda:GetFunctionScalingConfig',
  'lambda:GetAlias',
  'lambda:GetProvisionedConcurrencyConfig',
  'lambda:GetEventSourceMapping',
  'lambda:GetLayerVersion',
  'sns:GetSubscriptionAttributes',
  'sns:GetDataProtectionPolicy',
  's3:GetIntelligentTieringConfiguration',
  's3:ListTagsForResource',
  'dynamodb:DescribeContributorInsights',
  'logs:GetDataProtectionPolicy',
  'sqs:GetQueueUrl',
  'cognito-idp:GetUserPoolMfaConfig',
];

/** The `driftReadPolicy` that `DriftReadGapsPolicy` completes (template.yaml's `FillsSecurityAuditGaps` condition). */
export const SECURITY_AUDIT = 'SecurityAudit';

/**
 * template.yaml's `DriftReadGapsPolicy`: `DRIFT_READ_GAPS` on `*`, and API Gateway's read (`apigateway:GET`) of the
 * REST and HTTP/WebSocket APIs (any region: a stack may be in any).
 */
function driftReadGapsPolicy(): CustomerManagedPolicy {
  return {
    description: 'stacksync drift detection - read actions of common resource types that SecurityAudit lacks',
    statements: [
      new iam.PolicyStatement({ sid: 'ReadHandlersBeyondSecurityAudit', actions: DRIFT_READ_GAPS, resources: ['*'] }),
      new iam.PolicyStatement({
        sid: 'ApiGatewayApis',
        actions: ['apigateway:GET'],
        resources: [`arn:${Aws.PARTITION}:apigateway:*::/restapis/*`, `arn:${Aws.PARTITION}:apigateway:*::/apis/*`],
      }),
    ],
    wildcardReason:
      "Drift detection reads every resource of a stack with the caller's credentials (the drift function's role), " +
      "and which resources the managed stacks hold is up to their templates: these are the read actions of common " +
      "resource types that SecurityAudit lacks (from the types' CloudFormation read handlers), read-only, on any " +
      'resource of the type (several support no resource-level permission, and API Gateway APIs are named by ' +
      "generated ids in any region). Made only with driftReadPolicy SecurityAudit. As in template.yaml's DriftReadGapsPolicy.",
  };
}

/** The functions, as in template.yaml. A new function is one more row. */
export const FUNCTIONS: readonly FunctionSpec[] = [
  {
    id: 'ArtifactFetch',
    binary: 'artifact-fetch',
    description: 'stacksync artifact-fetch: lease, revision, artifact',
    errorsMetricId: 'fetch',
    reconcileStep: true,
    permissions: (p) => [
      // The run's entry (and what it records of the stacks it depends on): read whole, written only as a run
      // writes it (its status, its hold, when it is due), never its spec (README "Security model").
      p.readRegistry(),
      p.keys('RecordRun', ['dynamodb:UpdateItem'], ['stack#', 'dependents#'], [...RUN_ATTRIBUTES, 'names']),
      p.objects('Artifacts', ['s3:GetObject', 's3:PutObject'], ['artifacts']),
      p.listBucket('ArtifactExists'),
      ...p.putEvents(),
      // Private sources: Git credentials, S3 archives, CodeCommit.
      ...p.sourceSecrets(),
      ...p.sourceParameters(),
      ...p.sourceObjects(),
      ...p.sourceBuckets(),
      ...p.codeCommit(),
    ],
  },
  {
    id: 'TemplateUpload',
    binary: 'template-upload',
    description: 'stacksync template-upload: checks and stores the template',
    errorsMetricId: 'upload',
    reconcileStep: true,
    permissions: (p) => [
      // The run's entry (and what it records of the stacks it depends on): read whole, written only as a run
      // writes it (its status, its hold, when it is due), never its spec (README "Security model").
      p.readRegistry(),
      p.keys('RecordRun', ['dynamodb:UpdateItem'], ['stack#'], RUN_ATTRIBUTES),
      p.objects('ReadArtifacts', ['s3:GetObject'], ['artifacts']),
      p.objects('StoreTemplates', ['s3:GetObject', 's3:PutObject'], ['templates', 'parameters']),
      p.listBucket('ObjectExists'),
      // GetTemplate: is the stack still what the last run left (template and parameters)? In sync otherwise:
      // termination protection and the stack policy put back where they differ.
      p.stacks('cloudformation:DescribeStacks', 'cloudformation:GetTemplate', 'cloudformation:GetStackPolicy'),
      p.ownStacks('cloudformation:UpdateTerminationProtection', 'cloudformation:SetStackPolicy'),
      ...p.assumeTargetRoles(),
      ...p.putEvents(),
      // The stacks' parameters read from Secrets Manager and SSM ({secret: ARN}, {ssm: NAME}).
      ...p.valueSecrets(),
      ...p.valueParameters(),
    ],
  },
  {
    id: 'ChangeSet',
    binary: 'change-set',
    description: "stacksync change-set: acts on the stack's status",
    errorsMetricId: 'changeset',
    reconcileStep: true,
    permissions: (p) => [
      // The run's entry (and what it records of the stacks it depends on): read whole, written only as a run
      // writes it (its status, its hold, when it is due), never its spec (README "Security model").
      p.readRegistry(),
      p.keys('RecordRun', ['dynamodb:UpdateItem'], ['stack#'], RUN_ATTRIBUTES),
      // CloudFormation reads TemplateURL with the caller's permissions; the
      // URL names the object version template-upload compared.
      p.objects('Templates', ['s3:GetObjectVersion'], ['templates']),
      p.objects('Parameters', ['s3:GetObject'], ['parameters']),
      // An approved change set runs only if the answer function recorded who approved it (a token answered around
      // it is void).
      p.objects('VerifiedApprovals', ['s3:GetObject'], ['approvals/answers']),
      // So that a missing record reads as 404, not 403.
      p.listBucket('VerifiedApprovalExists'),
      p.stacks(
        'cloudformation:DescribeStacks',
        // Before executing: is it already executing (a retried step)?
        'cloudformation:DescribeChangeSet',
        'cloudformation:ListChangeSets',
        // The failure's root cause, when a rollback stays failed: the operation's events (validations too), else the stack's.
        'cloudformation:DescribeEvents',
        'cloudformation:DescribeStackEvents',
        // The stack as the run leaves it (in sync), for later runs to compare.
        'cloudformation:GetTemplate',
      ),
      p.ownStacks(
        'cloudformation:ExecuteChangeSet',
        // CreateChangeSet with tags and ExecuteChangeSet tag the stack (AWS's Service Authorization Reference).
        'cloudformation:TagResource',
        'cloudformation:UntagResource',
        'cloudformation:DeleteChangeSet',
        'cloudformation:ContinueUpdateRollback',
      ),
      // Every change set tags its stack as this installation's.
      p.changeSets(),
      // A template with a transform (AWS::Serverless, AWS::Include, ...) needs CreateChangeSet on the transform too.
      p.transforms(),
      ...p.passServiceRoles(),
      ...p.assumeTargetRoles(),
      ...p.putEvents(),
      // The stacks' parameters read from Secrets Manager and SSM ({secret: ARN}, {ssm: NAME}).
      ...p.valueSecrets(),
      ...p.valueParameters(),
    ],
  },
  {
    id: 'PollStatus',
    binary: 'poll-status',
    description: 'stacksync poll-status: wait again, go on, or finish',
    errorsMetricId: 'poll',
    reconcileStep: true,
    permissions: (p) => [
      // The run's entry (and what it records of the stacks it depends on): read whole, written only as a run
      // writes it (its status, its hold, when it is due), never its spec (README "Security model").
      p.readRegistry(),
      p.keys('RecordRun', ['dynamodb:UpdateItem'], ['stack#'], RUN_ATTRIBUTES),
      p.objects('Parameters', ['s3:GetObject'], ['parameters']),
      p.stacks(
        'cloudformation:DescribeStacks',
        'cloudformation:DescribeChangeSet',
        // The failure's root cause: the operation's (or the change set's) events, validations too; else the stack's.
        'cloudformation:DescribeEvents',
        'cloudformation:DescribeStackEvents',
        'cloudformation:GetStackPolicy',
        // The stack as the run leaves it, for later runs to compare.
        'cloudformation:GetTemplate',
      ),
      p.ownStacks('cloudformation:DeleteChangeSet', 'cloudformation:UpdateTerminationProtection', 'cloudformation:SetStackPolicy'),
      ...p.assumeTargetRoles(),
      ...p.putEvents(),
      // The stacks' secrets, read again when a run ends Ready: no output holding one is recorded (README "Outputs").
      ...p.valueSecrets(),
      ...p.valueParameters(),
    ],
  },
  {
    id: 'Delete',
    binary: 'delete',
    description: 'stacksync delete: deletes a stack, drops the entry',
    errorsMetricId: 'del',
    reconcileStep: true,
    permissions: (p) => [
      // The run's entry (and what it records of the stacks it depends on): read whole, written only as a run
      // writes it (its status, its hold, when it is due), never its spec (README "Security model").
      p.readRegistry(),
      p.keys('RecordRun', ['dynamodb:UpdateItem'], ['stack#'], RUN_ATTRIBUTES),
      // A removed entry, once its deletion was asked (the code's condition), and the claim it held on its stack's name.
      p.keys('ForgetEntry', ['dynamodb:DeleteItem'], ['stack#', 'claim#'], ['pk', 'deletionRequestedAt', 'leaseOwner', 'name']),
      // Why a delete failed: the operation's events, else the stack's.
      p.stacks('cloudformation:DescribeStacks', 'cloudformation:DescribeEvents', 'cloudformation:DescribeStackEvents'),
      // stacksync turned protection on (terminationProtection); it lifts it to delete. Never another
      // installation's stack (untagged ones too: a delete sent again once its stack is gone has no tags to match,
      // and the run deletes only the entry's own).
      p.ownStacks('cloudformation:UpdateTerminationProtection', 'cloudformation:DeleteStack'),
      ...p.passServiceRoles(),
      ...p.assumeTargetRoles(),
      ...p.putEvents(),
    ],
  },
  {
    // Called with a task token when a change set waits for approval: keeps the token where only the answer function
    // reads it, records what waits and where it is answered, and returns; the execution then waits for `stacksync
    // approve` or `reject` (through the answer function), no Lambda running.
    id: 'Approval',
    binary: 'approval',
    description: 'stacksync approval: records a change set that awaits approval',
    errorsMetricId: 'approval',
    reconcileStep: true,
    environment: (v) => ({ STACKSYNC_ANSWER_URL: v.answerUrl }),
    permissions: (p) => [
      // The wait's task token (the bucket's policy: no one else writes it, only the answer function reads it).
      p.objects('KeepTokens', ['s3:PutObject'], ['approvals/tokens']),
      // The run's entry (and what it records of the stacks it depends on): read whole, written only as a run
      // writes it (its status, its hold, when it is due), never its spec (README "Security model").
      p.readRegistry(),
      p.keys('RecordRun', ['dynamodb:UpdateItem'], ['stack#'], RUN_ATTRIBUTES),
      ...p.putEvents(),
    ],
  },
  {
    id: 'Finalize',
    binary: 'finalize',
    description: 'stacksync finalize: records a failure, releases the lease',
    errorsMetricId: 'fin',
    reconcileStep: true,
    permissions: (p) => [
      // The run's entry (and what it records of the stacks it depends on): read whole, written only as a run
      // writes it (its status, its hold, when it is due), never its spec (README "Security model").
      p.readRegistry(),
      p.keys('RecordRun', ['dynamodb:UpdateItem'], ['stack#'], RUN_ATTRIBUTES),
      // The failed run's change set, made and never executed, is deleted; the stack's status as it is now
      // is recorded with the failure.
      p.stacks('cloudformation:DescribeChangeSet', 'cloudformation:DescribeStacks'),
      p.ownStacks('cloudformation:DeleteChangeSet'),
      ...p.assumeTargetRoles(),
      ...p.putEvents(),
    ],
  },
  {
    // A trigger: Git hosts POST pushes to its Function URL; it starts the state machine.
    id: 'Webhook',
    binary: 'webhook',
    description: 'stacksync webhook: verifies a push, starts the stacks that follow it',
    errorsMetricId: 'hook',
    reconcileStep: false,
    timeoutSeconds: 30,
    environment: (v) => ({
      STACKSYNC_STATE_MACHINE_ARN: v.stateMachineArn,
      STACKSYNC_WEBHOOK_SECRET_ARN: v.webhookSecretArn,
    }),
    // Public (auth NONE), as in template.yaml: Git hosts call webhooks without AWS credentials; the function
    // authenticates every delivery itself (HMAC signature or GitLab token, checked against the webhookSecretArn
    // secret) and refuses every delivery when no secret is configured.
    publicUrl: { outputDescription: 'the Git webhook endpoint (payload URL of a GitHub/GitLab/Bitbucket webhook)' },
    // A flood of requests to the public URL cannot take the concurrency the reconcile steps need.
    reservedConcurrency: (v) => v.webhookReservedConcurrency,
    permissions: (p) => [
      // Delivery ids (delivery#...), so that a redelivered push starts nothing twice.
      p.deliveries(),
      p.followers(),
      p.startReconcile(),
      ...p.webhookSecret(),
    ],
  },
  {
    // A trigger: every scheduleExpression, starts the due stacks (at most maxStartsPerRun; the rest wait for the
    // next run), those whose source moved, and those changed outside stacksync (every stack checked, one
    // ListStacks per account and region). It reaches every Git server and holds the source secrets, so it carries
    // no managed policy: drift detection, which reads with one, is the drift function's.
    id: 'Scheduler',
    binary: 'scheduler',
    description: 'stacksync scheduler: starts the due stacks, those whose source moved, those changed outside stacksync',
    errorsMetricId: 'sched',
    reconcileStep: false,
    timeoutSeconds: 120,
    environment: (v) => ({
      STACKSYNC_STATE_MACHINE_ARN: v.stateMachineArn,
      STACKSYNC_MAX_STARTS: v.maxStartsPerRun,
      STACKSYNC_SCHEDULE: v.scheduleExpression,
    }),
    rules: (v) => ({
      Schedule: { description: 'Runs the stacksync scheduler', schedule: events.Schedule.expression(v.scheduleExpression) },
    }),
    permissions: (p) => [
      p.index('DueIndex', 'by-next-reconcile', 'dynamodb:Query'),
      p.followers(),
      p.index('WatchIndex', 'by-shard', 'dynamodb:Query'),
      // The health check: one listing per account and region.
      p.listStacks(),
      // A stack's nextReconcileAt and a source#'s head only: never a spec, lease or status.
      p.keys('MoveDue', ['dynamodb:UpdateItem'], ['stack#'], ['pk', 'nextReconcileAt']),
      // The sources it watches: their ref, head and the secret they are listed with.
      p.keys(
        'RecordSources',
        ['dynamodb:UpdateItem'],
        ['source#'],
        ['pk', 'url', 'ref', 'schedShard', 'nextReconcileAt', 'head', 'followersCheckedAt', 'credentialsSecret'],
      ),
      // A source no stack follows any more; never a stack's entry.
      p.keys('ForgetSource', ['dynamodb:DeleteItem'], ['source#'], ['pk', 'head']),
      p.startReconcile(),
      ...p.assumeTargetRoles(),
      // Listing private sources' refs and S3 sources' versions.
      ...p.sourceSecrets(),
      ...p.sourceParameters(),
      ...p.sourceObjects(),
      ...p.sourceBuckets(),
      ...p.codeCommit(),
    ],
  },
  {
    // A trigger, on the scheduler's schedule (scheduleExpression), a function of its own: starts the drift
    // detections that are due (at most maxDriftDetections at once per account and region), asks about those
    // running, records what the ended ones found. CloudFormation reads each resource with the caller's permissions,
    // so this role carries driftReadPolicy; it reaches no Git server, no source and no secret, and starts no
    // execution (a drift to revert makes its stack due; the scheduler starts it).
    id: 'Drift',
    binary: 'drift',
    description: 'stacksync drift: starts the drift detections that are due, records their findings',
    errorsMetricId: 'drift',
    reconcileStep: false,
    timeoutSeconds: 120,
    environment: (v) => ({ STACKSYNC_MAX_DETECTIONS: v.maxDriftDetections }),
    rules: (v) => ({
      Schedule: { description: 'Runs the stacksync drift detections', schedule: events.Schedule.expression(v.scheduleExpression) },
    }),
    permissions: (p) => [
      p.index('WatchIndex', 'by-shard', 'dynamodb:Query'),
      // One listing per account and region (drift statuses, last detections).
      p.listStacks(),
      // Drift detection (README "Drift"): start one, read its findings...
      p.drift(),
      // ...and ask how it goes, by its id (no resource-level permission).
      p.driftDetections(),
      // The entry whose drift is recorded (its drift settings), and the drift record (status.drift and
      // watch.drift), written only while no run holds the stack: never a spec or a lease. A drift to revert makes
      // its stack due (nextReconcileAt).
      p.keys(
        'RecordDrift',
        ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
        ['stack#'],
        ['pk', 'status', 'watch', 'leaseOwner', 'leaseExpiresAt', 'nextReconcileAt'],
      ),
      // Drift notices (Drift Detected, Drift Cleared, Drift Not Cleared).
      ...p.putEvents(),
      ...p.assumeTargetRoles(),
    ],
    // Drift detection reads the stacks' resources with this role's permissions (driftReadPolicy, default
    // SecurityAudit: metadata, no data; none: nothing attached)...
    managedPolicies: {
      names: (v) => (v.driftReadPolicy === 'none' ? [] : [v.driftReadPolicy]),
      reason:
        "Drift detection reads every resource type a stack may hold, and CloudFormation's drift detection reads " +
        "them with the caller's credentials (the drift function's role), so the role needs read access to whatever " +
        'the managed stacks contain, which no fixed list of actions covers. The policy is chosen by the installer ' +
        "(driftReadPolicy, template.yaml's DriftReadPolicy; default SecurityAudit, configuration and no data); " +
        "'none' attaches nothing. The drift function reaches no Git server, source or secret. As in template.yaml.",
    },
    // ...and what SecurityAudit lacks for the common resource types (README "Drift": what each choice reads).
    customerManagedPolicies: (v): Record<string, CustomerManagedPolicy> =>
      v.driftReadPolicy === SECURITY_AUDIT ? { DriftReadGapsPolicy: driftReadGapsPolicy() } : {},
  },
  {
    // A trigger, on EventBridge's default bus of this region: a CodeCommit push or an S3 object starts the stacks
    // that follow it; a CloudFormation status change that stacksync did not make marks the stack due.
    id: 'Events',
    binary: 'events',
    description: 'stacksync events: CodeCommit pushes, S3 objects, out-of-band stack changes',
    errorsMetricId: 'events',
    reconcileStep: false,
    timeoutSeconds: 30,
    environment: (v) => ({ STACKSYNC_STATE_MACHINE_ARN: v.stateMachineArn }),
    reservedConcurrency: (v) => v.eventsReservedConcurrency,
    rules: (v) => ({
      CodeCommitPush: {
        eventPattern: {
          source: ['aws.codecommit'],
          detailType: ['CodeCommit Repository State Change'],
          detail: { event: ['referenceCreated', 'referenceUpdated'] },
        },
      },
      // New objects in the S3 sources' buckets only (they must send their events to EventBridge); none: no rule.
      ...(v.sourceBucketNames.length === 0
        ? {}
        : {
            S3ObjectCreated: {
              eventPattern: { source: ['aws.s3'], detailType: ['Object Created'], detail: { bucket: { name: v.sourceBucketNames } } },
            },
          }),
      // Only the stacks this installation may manage (stackNamePrefix), in its account and region.
      StackStatusChange: {
        eventPattern: {
          source: ['aws.cloudformation'],
          detailType: ['CloudFormation Stack Status Change'],
          detail: { 'stack-id': [{ prefix: v.stackArnPrefix }] },
        },
      },
      // A reconcile execution that ended without its Catch (aborted, timed out) still holds its stack.
      ExecutionEnded: {
        eventPattern: {
          source: ['aws.states'],
          detailType: ['Step Functions Execution Status Change'],
          detail: { status: ['ABORTED', 'TIMED_OUT', 'FAILED'], stateMachineArn: [v.stateMachineArn] },
        },
      },
    }),
    permissions: (p) => [
      p.followers(),
      p.index('StackNameIndex', 'by-stack-name', 'dynamodb:Query'),
      // An out-of-band change only makes the stack due; an ended execution's hold is released (GetItem: whose?).
      p.keys(
        'MarkDue',
        ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
        ['stack#'],
        ['pk', 'nextReconcileAt', 'status', 'watch', 'leaseOwner', 'leaseExpiresAt', 'leaseTakenAt'],
      ),
      p.startReconcile(),
    ],
  },
  {
    // Behind an IAM-authorised Function URL: approves or rejects a change set that waits, for a caller AWS verified
    // (the URL's IAM authorizer, never a field of the request) who is among the entry's approvers or the
    // installation's (approvers). It alone reads the task tokens; before it answers one it records who approved
    // what, which the run checks.
    id: 'Answer',
    binary: 'answer',
    description: 'stacksync answer: approves or rejects a waiting change set, for a verified approver',
    errorsMetricId: 'answer',
    reconcileStep: false,
    timeoutSeconds: 30,
    environment: (v) => ({ STACKSYNC_APPROVERS: v.approvers.join(',') }),
    // AWS_IAM, as in template.yaml: AWS verifies the caller (SigV4) and its lambda:InvokeFunctionUrl permission
    // before the function runs, and the function reads who the caller is from the authorizer's context.
    iamUrl: {
      outputDescription: "the answer function's IAM-authorised URL, where stacksync approve and reject answer a waiting change set",
    },
    permissions: (p) => [
      p.readKeys('ReadEntries', ['stack#']),
      // A refused approval, among the approval records, while the run waits: never a spec, a lease or a due time.
      p.keys('RecordRefusals', ['dynamodb:UpdateItem'], ['stack#'], ['pk', 'status']),
      p.objects('ReadTokens', ['s3:GetObject'], ['approvals/tokens']),
      // So that a missing token reads as 404, not 403.
      p.listBucket('TokenExists'),
      p.objects('RecordAnswers', ['s3:PutObject'], ['approvals/answers']),
      // SendTaskSuccess and SendTaskFailure take no resource: the tokens' secrecy (the bucket's policy) is what
      // limits them.
      p.answerTokens(),
    ],
  },
];

/** An S3 bucket name (3 to 63 lowercase letters, digits, dots and hyphens). */
const BUCKET_NAME = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const ROLE_ARN = /^arn:aws(-[a-z]+)*:iam::\d{12}:role\/[\w+=,.@/-]{1,512}$/;
/** The registry's GSIs (RegistryTable below, template.yaml, shared/src/registry/schema.rs). */
const REGISTRY_INDEXES = ['by-next-reconcile', 'by-source', 'by-stack-name', 'by-shard'];
/** template.yaml's `AlarmTopicArn` AllowedPattern (without the empty alternative). */
const TOPIC_ARN = /^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}$/;
/** template.yaml's `WebhookSecretArn` AllowedPattern (without the empty alternative). */
const SECRET_ARN = /^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:[A-Za-z0-9/_+=.@-]+$/;
/** template.yaml's `SourceSecretArns` AllowedPattern (without the empty alternative): IAM wildcards allowed in the name. */
export const SOURCE_SECRET_ARN = /^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:[A-Za-z0-9/_+=.@*?-]+$/;
/** template.yaml's `SourceParameterArns` AllowedPattern (without the empty alternative): wildcards allowed in the name. */
export const SOURCE_PARAMETER_ARN = /^arn:aws[a-z-]*:ssm:[a-z0-9-]+:[0-9]{12}:parameter\/[A-Za-z0-9/_.*?-]+$/;
/** template.yaml's `ValueSecretArns` AllowedPattern (the same as `SourceSecretArns`). */
export const VALUE_SECRET_ARN = SOURCE_SECRET_ARN;
/** template.yaml's `ValueParameterArns` AllowedPattern (the same as `SourceParameterArns`). */
export const VALUE_PARAMETER_ARN = SOURCE_PARAMETER_ARN;
/** template.yaml's `CodeCommitRepositoryArns` AllowedPattern (without the empty alternative): wildcards allowed in the name. */
export const CODECOMMIT_REPOSITORY_ARN = /^arn:aws[a-z-]*:codecommit:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_.*?-]+$/;

/** The directory holding the Cargo workspace's Cargo.toml, searched upwards from `start`. */
export function findWorkspaceRoot(start: string = __dirname): string {
  let dir = path.resolve(start);
  for (;;) {
    const manifest = path.join(dir, 'Cargo.toml');
    if (fs.existsSync(manifest) && /^\[workspace\]/m.test(fs.readFileSync(manifest, 'utf8'))) {
      return dir;
    }
    const parent = path.dirname(dir);
    if (parent === dir) {
      throw new Error(`no Cargo workspace (a Cargo.toml with [workspace]) in ${start} or above`);
    }
    dir = parent;
  }
}

/**
 * A CloudFormation value flattened as cdk-nag names it in a finding
 * (`Resource::<Logical.Arn>/artifacts/*`), so a suppression names exactly one finding.
 */
export function nagFinding(value: unknown): string {
  const visit = (node: unknown): string => {
    if (typeof node === 'string') return node.replace(/\$\{/g, '<').replace(/\}/g, '>');
    if (node && typeof node === 'object') {
      const o = node as Record<string, unknown>;
      if (Array.isArray(o['Fn::Join'])) {
        const [sep, items] = o['Fn::Join'] as [string, unknown[]];
        return items.map(visit).join(sep);
      }
      if (o['Fn::Sub'] !== undefined) return visit(o['Fn::Sub']);
      if (Array.isArray(o['Fn::GetAtt'])) {
        const [res, attr] = o['Fn::GetAtt'] as [unknown, unknown];
        return `<${visit(res)}.${visit(attr)}>`;
      }
      if (o.Ref !== undefined) return `<${visit(o.Ref)}>`;
    }
    return JSON.stringify(node);
  };
  return visit(value);
}

export class StackSyncStack extends Stack {
  readonly table: dynamodb.Table;
  readonly bucket: s3.Bucket;
  readonly accessLogsBucket: s3.Bucket;
  readonly functions: Record<string, lambda.Function> = {};
  /** Each function's log group, by its FUNCTIONS id. */
  readonly logGroups: Record<string, logs.LogGroup> = {};
  /** The Function URLs of the rows with `publicUrl` or `iamUrl`, by row id. */
  readonly functionUrls: Record<string, lambda.FunctionUrl> = {};
  /** The EventBridge rules of the rows with `rules`, by row id and rule name. */
  readonly rules: Record<string, Record<string, events.Rule>> = {};
  readonly stateMachine: sfn.StateMachine;

  private readonly stackNamePrefix: string;
  private readonly requireRoleArn: boolean;
  private readonly cloudFormationRoleArns: string[];
  private readonly targetAccountRoleArns: string[];
  private readonly webhookSecretArn: string | undefined;
  private readonly alarmTopicArn: string | undefined;
  private readonly eventBusName: string;
  private readonly notificationTopicArn: string | undefined;
  private readonly scheduleExpression: string;
  private readonly maxStartsPerRun: number;
  private readonly maxDriftDetections: number;
  private readonly driftReadPolicy: string;
  private readonly approvers: string[];
  private readonly sourceBucketNames: string[];
  private readonly sourceSecretArns: string[];
  private readonly sourceParameterArns: string[];
  private readonly valueSecretArns: string[];
  private readonly valueParameterArns: string[];
  private readonly codeCommitRepositoryArns: string[];
  private readonly webhookReservedConcurrency: number;
  private readonly eventsReservedConcurrency: number;
  private readonly logRetention: logs.RetentionDays;
  private readonly architecture: lambda.Architecture;
  private readonly workspaceRoot: string;
  private readonly cargoProfile: string;

  constructor(scope: Construct, id: string, props: StackSyncProps = {}) {
    super(scope, id, {
      description:
        'stacksync: serverless GitOps for AWS CloudFormation. The registry (DynamoDB), the artifact bucket (S3), ' +
        'the reconcile step functions (Lambda), the reconcile state machine (Step Functions), and the triggers: the ' +
        'Git webhook (Lambda Function URL), the scheduler and the drift function (an EventBridge schedule) and the ' +
        'EventBridge rules (CodeCommit, S3, CloudFormation status changes).',
      ...props,
    });

    this.stackNamePrefix = props.stackNamePrefix ?? 'stacksync-';
    this.requireRoleArn = props.requireRoleArn ?? true;
    if (!/^[A-Za-z0-9-]*$/.test(this.stackNamePrefix)) {
      throw new Error(`stackNamePrefix "${this.stackNamePrefix}": only letters, digits and "-"`);
    }
    const roleArn = 'an IAM role ARN (arn:PARTITION:iam::ACCOUNT:role/NAME, no wildcards)';
    this.cloudFormationRoleArns = checkArns('cloudFormationRoleArns', props.cloudFormationRoleArns, ROLE_ARN, roleArn);
    this.targetAccountRoleArns = checkArns('targetAccountRoleArns', props.targetAccountRoleArns, ROLE_ARN, roleArn);
    this.webhookSecretArn = props.webhookSecretArn === '' ? undefined : props.webhookSecretArn;
    if (this.webhookSecretArn !== undefined && !SECRET_ARN.test(this.webhookSecretArn)) {
      throw new Error(
        `webhookSecretArn "${this.webhookSecretArn}": not a Secrets Manager secret ARN ` +
          '(arn:PARTITION:secretsmanager:REGION:ACCOUNT:secret:NAME, no wildcards)',
      );
    }
    this.alarmTopicArn = props.alarmTopicArn === '' ? undefined : props.alarmTopicArn;
    if (this.alarmTopicArn !== undefined && !TOPIC_ARN.test(this.alarmTopicArn)) {
      throw new Error(`alarmTopicArn "${this.alarmTopicArn}": not an SNS topic ARN (arn:PARTITION:sns:REGION:ACCOUNT:NAME)`);
    }
    this.eventBusName = props.eventBusName ?? 'default';
    if (!/^[/.\-_A-Za-z0-9]{1,256}$/.test(this.eventBusName)) {
      throw new Error(`eventBusName "${this.eventBusName}": an event bus name of this account and region, or none`);
    }
    this.notificationTopicArn = props.notificationTopicArn === '' ? undefined : props.notificationTopicArn;
    if (this.notificationTopicArn !== undefined && !TOPIC_ARN.test(this.notificationTopicArn)) {
      throw new Error(`notificationTopicArn "${this.notificationTopicArn}": not an SNS topic ARN (arn:PARTITION:sns:REGION:ACCOUNT:NAME)`);
    }
    this.scheduleExpression = props.scheduleExpression ?? 'rate(5 minutes)';
    if (!SCHEDULE_EXPRESSION.test(this.scheduleExpression)) {
      throw new Error(
        `scheduleExpression "${this.scheduleExpression}": an EventBridge rate(...) or cron(...) expression, ` +
          'such as rate(5 minutes) or cron(0/10 * * * ? *)',
      );
    }
    this.maxStartsPerRun = props.maxStartsPerRun ?? 50;
    if (!Number.isInteger(this.maxStartsPerRun) || this.maxStartsPerRun < 1 || this.maxStartsPerRun > 1000) {
      throw new Error(`maxStartsPerRun ${this.maxStartsPerRun}: a whole number from 1 to 1000`);
    }
    this.maxDriftDetections = props.maxDriftDetections ?? 10;
    if (!Number.isInteger(this.maxDriftDetections) || this.maxDriftDetections < 1 || this.maxDriftDetections > 100) {
      throw new Error(`maxDriftDetections ${this.maxDriftDetections}: a whole number from 1 to 100`);
    }
    this.driftReadPolicy = props.driftReadPolicy ?? SECURITY_AUDIT;
    if (!DRIFT_READ_POLICY.test(this.driftReadPolicy)) {
      throw new Error(`driftReadPolicy "${this.driftReadPolicy}": an AWS managed policy's name (such as SecurityAudit), or none`);
    }
    this.approvers = checkArns(
      'approvers',
      props.approvers,
      APPROVER_PATTERN,
      'an IAM principal ARN pattern (arn:PARTITION:iam::ACCOUNT:role/NAME without its path, ...:user/NAME or ' +
        'arn:PARTITION:sts::ACCOUNT:assumed-role/ROLE/SESSION, * and ? allowed in the name)',
    );
    this.sourceBucketNames = [...new Set(props.sourceBucketNames ?? [])];
    for (const bucket of this.sourceBucketNames) {
      if (!BUCKET_NAME.test(bucket)) throw new Error(`sourceBucketNames: "${bucket}" is not an S3 bucket name`);
    }
    this.sourceSecretArns = checkArns(
      'sourceSecretArns',
      props.sourceSecretArns,
      SOURCE_SECRET_ARN,
      'a Secrets Manager secret ARN (arn:PARTITION:secretsmanager:REGION:ACCOUNT:secret:NAME, * and ? allowed in NAME)',
    );
    this.sourceParameterArns = checkArns(
      'sourceParameterArns',
      props.sourceParameterArns,
      SOURCE_PARAMETER_ARN,
      'an SSM parameter ARN (arn:PARTITION:ssm:REGION:ACCOUNT:parameter/NAME, * and ? allowed in NAME)',
    );
    this.valueSecretArns = checkArns(
      'valueSecretArns',
      props.valueSecretArns,
      VALUE_SECRET_ARN,
      'a Secrets Manager secret ARN (arn:PARTITION:secretsmanager:REGION:ACCOUNT:secret:NAME, * and ? allowed in NAME)',
    );
    this.valueParameterArns = checkArns(
      'valueParameterArns',
      props.valueParameterArns,
      VALUE_PARAMETER_ARN,
      'an SSM parameter ARN (arn:PARTITION:ssm:REGION:ACCOUNT:parameter/NAME, * and ? allowed in NAME)',
    );
    this.codeCommitRepositoryArns = checkArns(
      'codeCommitRepositoryArns',
      props.codeCommitRepositoryArns,
      CODECOMMIT_REPOSITORY_ARN,
      'a CodeCommit repository ARN (arn:PARTITION:codecommit:REGION:ACCOUNT:NAME, * and ? allowed in NAME)',
    );
    const concurrency = (name: string, value: number | undefined, fallback: number): number => {
      const n = value ?? fallback;
      if (!Number.isInteger(n) || n < 0 || n > 1000) throw new Error(`${name} ${n}: a whole number from 0 to 1000`);
      return n;
    };
    this.webhookReservedConcurrency = concurrency('webhookReservedConcurrency', props.webhookReservedConcurrency, 10);
    this.eventsReservedConcurrency = concurrency('eventsReservedConcurrency', props.eventsReservedConcurrency, 5);
    const days = props.logRetentionDays ?? 30;
    if (!(LOG_RETENTION_DAYS as readonly number[]).includes(days)) {
      throw new Error(`logRetentionDays ${days}: one of ${LOG_RETENTION_DAYS.join(', ')}`);
    }
    this.logRetention = days as logs.RetentionDays;
    const arch = props.architecture ?? 'x86_64';
    if (arch !== 'arm64' && arch !== 'x86_64') {
      throw new Error(`architecture "${String(arch)}": arm64 or x86_64`);
    }
    this.architecture = arch === 'arm64' ? lambda.Architecture.ARM_64 : lambda.Architecture.X86_64;
    this.workspaceRoot = props.workspaceRoot ?? findWorkspaceRoot();
    this.cargoProfile = props.cargoProfile ?? 'release';

    // ---- the registry --------------------------------------------------------
    // The schema is shared/src/registry/schema.rs (a Rust test compares it with template.yaml).
    this.table = new dynamodb.Table(this, 'RegistryTable', {
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING },
      timeToLiveAttribute: 'expiresAt',
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      encryption: dynamodb.TableEncryption.AWS_MANAGED,
      deletionProtection: true,
      removalPolicy: RemovalPolicy.RETAIN,
    });
    this.table.addGlobalSecondaryIndex({
      indexName: 'by-next-reconcile',
      partitionKey: { name: 'schedShard', type: dynamodb.AttributeType.STRING },
      sortKey: { name: 'nextReconcileAt', type: dynamodb.AttributeType.NUMBER },
      projectionType: dynamodb.ProjectionType.ALL,
    });
    this.table.addGlobalSecondaryIndex({
      indexName: 'by-source',
      partitionKey: { name: 'sourceKey', type: dynamodb.AttributeType.STRING },
      sortKey: { name: 'pk', type: dynamodb.AttributeType.STRING },
      projectionType: dynamodb.ProjectionType.ALL,
    });
    this.table.addGlobalSecondaryIndex({
      indexName: 'by-stack-name',
      partitionKey: { name: 'stackName', type: dynamodb.AttributeType.STRING },
      sortKey: { name: 'pk', type: dynamodb.AttributeType.STRING },
      projectionType: dynamodb.ProjectionType.ALL,
    });
    // The scheduler's health check reads every stack on every run: only what it compares.
    this.table.addGlobalSecondaryIndex({
      indexName: 'by-shard',
      partitionKey: { name: 'schedShard', type: dynamodb.AttributeType.STRING },
      sortKey: { name: 'pk', type: dynamodb.AttributeType.STRING },
      projectionType: dynamodb.ProjectionType.INCLUDE,
      nonKeyAttributes: ['name', 'stackName', 'watch', 'suspended', 'deletionRequestedAt', 'leaseExpiresAt', 'nextReconcileAt'],
    });

    // ---- artifacts and templates -----------------------------------------------
    // Server access logs of the artifact bucket go to a bucket of their own
    // (SSE-S3: S3 log delivery cannot write to SSE-KMS buckets).
    this.accessLogsBucket = new s3.Bucket(this, 'AccessLogsBucket', {
      encryption: s3.BucketEncryption.S3_MANAGED,
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      enforceSSL: true,
      lifecycleRules: [
        { id: 'expire-access-logs', expiration: Duration.days(days), abortIncompleteMultipartUploadAfter: Duration.days(1) },
      ],
      removalPolicy: RemovalPolicy.RETAIN,
    });
    NagSuppressions.addResourceSuppressions(this.accessLogsBucket, [
      {
        id: 'AwsSolutions-S1',
        reason:
          'This bucket is the destination of the artifact bucket\'s server access logs; logging it too would need ' +
          'yet another bucket (and logging it into itself would log its own log deliveries).',
      },
    ]);

    this.bucket = new s3.Bucket(this, 'ArtifactBucket', {
      encryption: s3.BucketEncryption.S3_MANAGED,
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      versioned: true,
      enforceSSL: true,
      serverAccessLogsBucket: this.accessLogsBucket,
      serverAccessLogsPrefix: 'artifact-bucket/',
      lifecycleRules: [
        { id: 'expire-artifacts', prefix: 'artifacts/', expiration: Duration.days(30) },
        { id: 'expire-parameters', prefix: 'parameters/', expiration: Duration.days(90) },
        { id: 'expire-old-templates', prefix: 'templates/', expiration: Duration.days(365) },
        // Longer than any approval waits (approvalTimeout: 30 days at most).
        { id: 'expire-approvals', prefix: 'approvals/', expiration: Duration.days(32) },
        {
          id: 'expire-noncurrent-versions',
          noncurrentVersionExpiration: Duration.days(7),
          abortIncompleteMultipartUploadAfter: Duration.days(1),
        },
      ],
      removalPolicy: RemovalPolicy.RETAIN,
    });

    // ---- the reconcile step functions ------------------------------------------------
    const steps = FUNCTIONS.filter((f) => f.reconcileStep);
    for (const spec of steps) {
      this.functions[spec.id] = this.addFunction(spec);
    }

    // ---- the state machine ---------------------------------------------------------
    const stateMachineLogs = new logs.LogGroup(this, 'StateMachineLogs', {
      retention: this.logRetention,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    this.stateMachine = new sfn.StateMachine(this, 'ReconcileStateMachine', {
      stateMachineType: sfn.StateMachineType.STANDARD,
      definitionBody: sfn.DefinitionBody.fromFile(path.join(this.workspaceRoot, 'statemachine', 'reconcile.asl.json')),
      definitionSubstitutions: Object.fromEntries(
        steps.map((f) => [`${f.id}FunctionArn`, this.functions[f.id].functionArn]),
      ),
      tracingEnabled: true,
      logs: { destination: stateMachineLogs, level: sfn.LogLevel.ERROR, includeExecutionData: false },
    });
    // The machine invokes the functions by their unqualified ARNs (Resource: ${...FunctionArn}).
    this.stateMachine.addToRolePolicy(
      new iam.PolicyStatement({
        sid: 'InvokeSteps',
        actions: ['lambda:InvokeFunction'],
        resources: steps.map((f) => this.functions[f.id].functionArn),
      }),
    );
    NagSuppressions.addResourceSuppressions(
      this.stateMachine,
      [
        {
          id: 'AwsSolutions-IAM5',
          appliesTo: ['Resource::*'],
          reason:
            'Added by the StateMachine construct for logging and tracing: the CloudWatch Logs log-delivery actions ' +
            '(logs:CreateLogDelivery, GetLogDelivery, UpdateLogDelivery, DeleteLogDelivery, ListLogDeliveries, ' +
            'PutResourcePolicy, DescribeResourcePolicies, DescribeLogGroups) and X-Ray (xray:PutTraceSegments, ' +
            'PutTelemetryRecords, GetSamplingRules, GetSamplingTargets) support no resource-level permissions; AWS ' +
            'documents "*" for both. template.yaml grants the same.',
        },
        {
          id: 'AwsSolutions-SF1',
          reason:
            'Logs level ERROR as in template.yaml: the machine routes on $.next and loops while CloudFormation works, ' +
            'so ALL would log every poll of every run; the execution history (90 days) and X-Ray traces keep the ' +
            'successful transitions, and failures are logged.',
        },
      ],
      true,
    );

    // ---- the triggers (after the state machine, which they start) ------------------------
    for (const spec of FUNCTIONS.filter((f) => !f.reconcileStep)) {
      this.functions[spec.id] = this.addFunction(spec);
    }

    // The bucket's policy names the roles of steps and of the answer function (made with the triggers).
    this.protectStoredObjects();

    // Registry items no reader can use (skipped, and logged by the scheduler's reads): counted
    // (template.yaml: UnreadableRegistryItemsMetric), and alarmed on with a topic.
    new logs.MetricFilter(this, 'UnreadableRegistryItemsMetric', {
      logGroup: this.logGroups.Scheduler,
      filterPattern: logs.FilterPattern.literal('"registry item skipped"'),
      metricNamespace: 'stacksync',
      metricName: 'UnreadableRegistryItems',
      metricValue: '1',
      unit: cloudwatch.Unit.COUNT,
    });

    // ---- events: an example rule (with a notificationTopicArn only) ---------------------
    if (this.notificationTopicArn !== undefined && this.eventBusName !== 'none') {
      new events.CfnRule(this, 'NotificationRule', {
        description: 'stacksync: failed runs, change sets awaiting approval and drift found, to NotificationTopicArn',
        eventBusName: this.eventBusName,
        eventPattern: {
          source: ['stacksync'],
          'detail-type': ['Reconcile Failed', 'Approval Requested', 'Change Set Rejected', 'Drift Detected', 'Drift Not Cleared'],
          detail: { installation: [this.table.tableName] },
        },
        targets: [{ id: 'notification-topic', arn: this.notificationTopicArn }],
      });
    }

    // ---- alarms (with an alarmTopicArn only) ---------------------------------------------
    if (this.alarmTopicArn !== undefined) this.addAlarms(this.alarmTopicArn);

    // ---- outputs ----------------------------------------------------------------------
    new CfnOutput(this, 'RegistryTableName', {
      description: 'the registry (STACKSYNC_TABLE)',
      value: this.table.tableName,
    });
    new CfnOutput(this, 'ArtifactBucketName', {
      description: 'the artifact and template bucket (STACKSYNC_BUCKET)',
      value: this.bucket.bucketName,
    });
    new CfnOutput(this, 'StateMachineArn', {
      description: 'the reconcile state machine',
      value: this.stateMachine.stateMachineArn,
    });
    // What the installation allows its entries: `stacksync apply` checks specs against it.
    new CfnOutput(this, 'StackNamePrefix', {
      description: 'only stacks whose names start so are managed',
      value: this.stackNamePrefix === '' ? '*' : this.stackNamePrefix,
    });
    new CfnOutput(this, 'ServiceRoleArns', {
      description: 'the service roles entries may name as roleArn',
      value: this.cloudFormationRoleArns.length === 0 ? '-' : this.cloudFormationRoleArns.join(','),
    });
    new CfnOutput(this, 'RequireRoleArn', {
      description: 'whether every entry must name roleArn',
      value: String(this.requireRoleArn),
    });
    for (const spec of FUNCTIONS) {
      const url = spec.publicUrl ?? spec.iamUrl;
      if (!url) continue;
      new CfnOutput(this, `${spec.id}Url`, {
        description: url.outputDescription,
        value: this.functionUrls[spec.id].url,
      });
    }
  }

  /** The seven alarms of template.yaml (and the metric filter only one of them needs), each notifying `topicArn`. */
  private addAlarms(topicArn: string): void {
    const notify = new cloudwatchActions.SnsAction(sns.Topic.fromTopicArn(this, 'AlarmTopic', topicArn));
    const period = Duration.minutes(5);
    const alarmDefaults = {
      evaluationPeriods: 1,
      threshold: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    };
    // The sum of the functions' errors: an alarm's metric math takes 10 metrics at most (CloudWatch), so the steps
    // have one alarm and the other functions another, as in template.yaml.
    const errorsAlarm = (id: string, description: string, steps: boolean) => {
      const alarmed = FUNCTIONS.filter((f) => f.reconcileStep === steps && f.errorsMetricId !== undefined);
      if (alarmed.length > 10) throw new Error(`${id}: ${alarmed.length} metrics, an alarm's metric math takes at most 10`);
      return new cloudwatch.Alarm(this, id, {
        alarmDescription: description,
        metric: new cloudwatch.MathExpression({
          expression: `SUM([${alarmed.map((f) => f.errorsMetricId).join(', ')}])`,
          usingMetrics: Object.fromEntries(
            alarmed.map((f) => [f.errorsMetricId!, this.functions[f.id].metricErrors({ period, statistic: cloudwatch.Stats.SUM })]),
          ),
          period,
        }),
        ...alarmDefaults,
      });
    };
    const alarms = [
      new cloudwatch.Alarm(this, 'FailedReconcilesAlarm', {
        alarmDescription: 'stacksync reconciles are failing (see `stacksync status`)',
        metric: this.stateMachine.metricFailed({ period, statistic: cloudwatch.Stats.SUM }),
        ...alarmDefaults,
      }),
      errorsAlarm('FunctionErrorsAlarm', 'a stacksync step function reports errors', true),
      errorsAlarm(
        'TriggerErrorsAlarm',
        'a stacksync trigger (webhook, scheduler, drift, events) or the answer function reports errors',
        false,
      ),
      // A public URL's refused requests (bad signatures, bodies too large, malformed) beyond a misconfigured
      // sender's few mean someone is probing or flooding it (template.yaml: WebhookRejectionsAlarm).
      ...FUNCTIONS.filter((f) => f.publicUrl).map(
        (spec) =>
          new cloudwatch.Alarm(this, `${spec.id}RejectionsAlarm`, {
            alarmDescription: `the stacksync ${spec.binary} refused 10 or more requests (4xx) in 5 minutes`,
            metric: new cloudwatch.Metric({
              namespace: 'AWS/Lambda',
              metricName: 'Url4xxCount',
              dimensionsMap: { FunctionName: this.functions[spec.id].functionName },
              statistic: cloudwatch.Stats.SUM,
              period,
            }),
            ...alarmDefaults,
            threshold: 10,
          }),
      ),
      new cloudwatch.Alarm(this, 'UnreadableRegistryItemsAlarm', {
        alarmDescription: 'a registry item cannot be read, and every reader skips it (see `stacksync status`)',
        metric: new cloudwatch.Metric({
          namespace: 'stacksync',
          metricName: 'UnreadableRegistryItems',
          statistic: cloudwatch.Stats.SUM,
          period,
        }),
        ...alarmDefaults,
      }),
      // The webhook cannot read its secret: every delivery is answered 401, as a bad signature, and each refusal logs
      // `webhook delivery refused` at ERROR (the others at WARN). Counted from its text log, the level first (` WARN`,
      // `ERROR`): a regex anchored at the start, `.` for each space (CloudWatch's regex takes none), so no WARN line's
      // reason or delivery id can match (template.yaml: WebhookSecretUnreadableMetric, WebhookSecretUnreadableAlarm).
      new cloudwatch.Alarm(this, 'WebhookSecretUnreadableAlarm', {
        alarmDescription:
          'the stacksync webhook cannot read its secret and refuses every delivery (its log, `webhook delivery refused` at ERROR, says why)',
        metric: new logs.MetricFilter(this, 'WebhookSecretUnreadableMetric', {
          logGroup: this.logGroups.Webhook,
          filterPattern: logs.FilterPattern.literal('%^ERROR.*webhook.delivery.refused%'),
          metricNamespace: 'stacksync',
          metricName: 'WebhookSecretUnreadable',
          metricValue: '1',
          unit: cloudwatch.Unit.COUNT,
        }).metric({ statistic: cloudwatch.Stats.SUM, period }),
        ...alarmDefaults,
      }),
      new cloudwatch.Alarm(this, 'ThrottlesAlarm', {
        alarmDescription: 'stacksync functions are throttled (account concurrency)',
        metric: new cloudwatch.Metric({ namespace: 'AWS/Lambda', metricName: 'Throttles', statistic: cloudwatch.Stats.SUM, period }),
        ...alarmDefaults,
      }),
    ];
    for (const alarm of alarms) alarm.addAlarmAction(notify);
  }

  /**
   * What CloudFormation deploys is stored in the bucket by content: nobody
   * but the step that stores an object may write or delete it (an
   * administrator too; delete these statements first to empty the bucket).
   * A run's approval token is read by the answer function alone (an
   * administrator too is refused), written by the approval function alone;
   * the answer function's verified records are written by it alone.
   * Target-account roles may read templates by version, of their own
   * account's stacks only (`aws:PrincipalAccount`, an IAM policy variable):
   * CloudFormation there reads the TemplateURL with the assumed role's
   * credentials.
   */
  private protectStoredObjects(): void {
    const write = ['s3:PutObject', 's3:DeleteObject', 's3:DeleteObjectVersion'];
    const only: [string, string, string[], string[]][] = [
      ['OnlyArtifactFetchWritesArtifacts', 'ArtifactFetch', write, ['artifacts/*']],
      ['OnlyTemplateUploadWritesTemplates', 'TemplateUpload', write, ['templates/*', 'parameters/*']],
      ['OnlyTheAnswerFunctionReadsTokens', 'Answer', ['s3:GetObject', 's3:GetObjectVersion'], ['approvals/tokens/*']],
      ['OnlyTheApprovalFunctionWritesTokens', 'Approval', write, ['approvals/tokens/*']],
      ['OnlyTheAnswerFunctionWritesAnswers', 'Answer', write, ['approvals/answers/*']],
    ];
    for (const [sid, id, actions, prefixes] of only) {
      this.bucket.addToResourcePolicy(
        new iam.PolicyStatement({
          sid,
          effect: iam.Effect.DENY,
          principals: [new iam.AnyPrincipal()],
          actions,
          resources: prefixes.map((p) => this.bucket.arnForObjects(p)),
          conditions: { ArnNotEquals: { 'aws:PrincipalArn': this.functions[id].role!.roleArn } },
        }),
      );
    }
    if (this.targetAccountRoleArns.length > 0) {
      this.bucket.addToResourcePolicy(
        new iam.PolicyStatement({
          sid: 'TargetAccountsReadTheirTemplates',
          principals: this.targetAccountRoleArns.map((arn) => new iam.ArnPrincipal(arn)),
          actions: ['s3:GetObjectVersion'],
          // Literal in the policy: IAM fills in the calling role's account.
          resources: [this.bucket.arnForObjects('templates/accounts/${aws:PrincipalAccount}/*')],
        }),
      );
    }
  }

  /** One function of FUNCTIONS: its log group, its role (exactly its row's statements), the function. */
  private addFunction(spec: FunctionSpec): lambda.Function {
    const logGroup = new logs.LogGroup(this, `${spec.id}Logs`, {
      retention: this.logRetention,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    this.logGroups[spec.id] = logGroup;
    const statements = [
      ...spec.permissions(this.permissions(spec)),
      new iam.PolicyStatement({
        sid: 'OwnLogs',
        actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
        resources: [logGroup.logGroupArn],
      }),
    ];
    const role = new iam.Role(this, `${spec.id}Role`, {
      description: `stacksync ${spec.binary}`,
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      inlinePolicies: { [spec.binary]: new iam.PolicyDocument({ statements }) },
    });
    const managedPolicies = (spec.managedPolicies?.names(this.stackValues(spec)) ?? []).map((name) =>
      iam.ManagedPolicy.fromAwsManagedPolicyName(name),
    );
    for (const policy of managedPolicies) role.addManagedPolicy(policy);
    // Customer managed policies (template.yaml: an AWS::IAM::ManagedPolicy the function's Policies name by !Ref),
    // attached through the role's ManagedPolicyArns as SAM attaches them.
    for (const [id, own] of Object.entries(spec.customerManagedPolicies?.(this.stackValues(spec)) ?? {})) {
      const policy = new iam.ManagedPolicy(this, id, {
        description: own.description,
        document: new iam.PolicyDocument({ statements: own.statements }),
      });
      role.addManagedPolicy(policy);
      NagSuppressions.addResourceSuppressions(policy, this.customerPolicySuppressions(own));
    }
    const fn = new RustFunction(this, `${spec.id}Function`, {
      manifestPath: path.join(this.workspaceRoot, 'Cargo.toml'),
      binaryName: spec.binary,
      bundling: { architecture: this.architecture, profile: this.cargoProfile },
      runtime: 'provided.al2023',
      architecture: this.architecture,
      description: spec.description,
      memorySize: 256,
      timeout: Duration.seconds(spec.timeoutSeconds ?? 300),
      reservedConcurrentExecutions: spec.reservedConcurrency?.(this.stackValues(spec)) || undefined,
      tracing: lambda.Tracing.ACTIVE,
      role,
      logGroup,
      environment: {
        STACKSYNC_TABLE: this.table.tableName,
        STACKSYNC_BUCKET: this.bucket.bucketName,
        // Template URLs in the installation's partition (amazonaws.com.cn in China, ...).
        STACKSYNC_TEMPLATE_URL_BASE: `https://${this.bucket.bucketRegionalDomainName}`,
        STACKSYNC_LOG: 'info',
        // What the installation allows its entries (the steps check it).
        STACKSYNC_STACK_NAME_PREFIX: this.stackNamePrefix,
        STACKSYNC_SERVICE_ROLE_ARNS: this.cloudFormationRoleArns.join(','),
        STACKSYNC_REQUIRE_ROLE_ARN: String(this.requireRoleArn),
        // Where the runs' events go (none: nowhere).
        STACKSYNC_EVENT_BUS: this.eventBusName,
        ...spec.environment?.(this.stackValues(spec)),
      },
    });
    if (spec.publicUrl && spec.iamUrl) throw new Error(`${spec.id}: publicUrl or iamUrl, not both`);
    if (spec.publicUrl) {
      // AWS::Lambda::Url plus the two public permissions (lambda:InvokeFunctionUrl with FunctionUrlAuthType NONE,
      // lambda:InvokeFunction only via the URL), as SAM's FunctionUrlConfig AuthType NONE.
      this.functionUrls[spec.id] = new lambda.FunctionUrl(this, `${spec.id}FunctionUrl`, {
        function: fn,
        authType: lambda.FunctionUrlAuthType.NONE,
      });
    }
    if (spec.iamUrl) {
      // AWS::Lambda::Url alone, as SAM's FunctionUrlConfig AuthType AWS_IAM: no resource-based permission, so only
      // principals whose own IAM policies allow lambda:InvokeFunctionUrl on it may call it.
      this.functionUrls[spec.id] = new lambda.FunctionUrl(this, `${spec.id}FunctionUrl`, {
        function: fn,
        authType: lambda.FunctionUrlAuthType.AWS_IAM,
      });
    }
    for (const [name, rule] of Object.entries(spec.rules?.(this.stackValues(spec)) ?? {})) {
      if ((rule.schedule === undefined) === (rule.eventPattern === undefined)) {
        throw new Error(`${spec.id}: rule ${name} needs exactly one of schedule and eventPattern`);
      }
      // The target adds the AWS::Lambda::Permission for events.amazonaws.com with this rule as SourceArn, as SAM does.
      (this.rules[spec.id] ??= {})[name] = new events.Rule(this, `${spec.id}Function${name}`, {
        description: rule.description,
        schedule: rule.schedule,
        eventPattern: rule.eventPattern,
        targets: [new targets.LambdaFunction(fn)],
      });
    }
    // With applyToChildren, the suppressions cover the role's DefaultPolicy, where lambda.Function puts its X-Ray statement.
    NagSuppressions.addResourceSuppressions(
      role,
      [
        ...this.wildcardSuppressions(spec, statements),
        ...managedPolicies.map((policy) => ({
          id: 'AwsSolutions-IAM4',
          appliesTo: [`Policy::${nagFinding(this.resolve(policy.managedPolicyArn))}`],
          reason: spec.managedPolicies!.reason,
        })),
        {
          id: 'AwsSolutions-IAM5',
          appliesTo: ['Resource::*'],
          reason:
            'xray:PutTraceSegments and xray:PutTelemetryRecords (added by lambda.Function for active tracing) support ' +
            'no resource-level permissions; AWS documents "*". SAM adds the same for Tracing: Active.',
        },
      ],
      true,
    );
    return fn;
  }

  /** The stack's state machine, for rows made after it (`reconcileStep: false`). */
  private machineFor(spec: FunctionSpec): sfn.StateMachine {
    if (this.stateMachine === undefined) {
      throw new Error(`${spec.id}: a reconcile step cannot refer to the state machine (it is made after the steps)`);
    }
    return this.stateMachine;
  }

  private stackValues(spec: FunctionSpec): StackValues {
    const stack = this;
    return {
      get stateMachineArn() {
        return stack.machineFor(spec).stateMachineArn;
      },
      webhookSecretArn: this.webhookSecretArn ?? '',
      scheduleExpression: this.scheduleExpression,
      maxStartsPerRun: String(this.maxStartsPerRun),
      maxDriftDetections: String(this.maxDriftDetections),
      driftReadPolicy: this.driftReadPolicy,
      approvers: this.approvers,
      answerUrl: Lazy.string({
        produce: () => {
          const url = this.functionUrls.Answer;
          if (url === undefined) throw new Error(`${spec.id}: no answer function URL (the Answer row's iamUrl)`);
          return url.url;
        },
      }),
      stackArnPrefix: `arn:${Aws.PARTITION}:cloudformation:${Aws.REGION}:${Aws.ACCOUNT_ID}:stack/${this.stackNamePrefix}`,
      sourceBucketNames: this.sourceBucketNames,
      webhookReservedConcurrency: this.webhookReservedConcurrency,
      eventsReservedConcurrency: this.eventsReservedConcurrency,
    };
  }

  private permissions(spec: FunctionSpec): Permissions {
    const stacksArn = this.stacksArn();
    // The stack's stacksync:installation tag names this installation (its registry table).
    const ours = { [`aws:ResourceTag/${INSTALLATION_TAG}`]: this.table.tableName };
    return {
      readRegistry: () =>
        new iam.PolicyStatement({
          sid: 'ReadRegistry',
          actions: ['dynamodb:GetItem'],
          resources: [this.table.tableArn],
          conditions: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': RUN_KEY_PREFIXES.map((k) => `${k}*`) } },
        }),
      readKeys: (sid, keyPrefixes) =>
        new iam.PolicyStatement({
          sid,
          actions: ['dynamodb:GetItem'],
          resources: [this.table.tableArn],
          conditions: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': keyPrefixes.map((k) => `${k}*`) } },
        }),
      objects: (sid, actions, prefixes) =>
        new iam.PolicyStatement({ sid, actions, resources: prefixes.map((p) => this.bucket.arnForObjects(`${p}/*`)) }),
      listBucket: (sid) =>
        new iam.PolicyStatement({ sid, actions: ['s3:ListBucket'], resources: [this.bucket.bucketArn] }),
      stacks: (...actions) => new iam.PolicyStatement({ sid: 'Stacks', actions, resources: [stacksArn] }),
      ownStacks: (...actions) =>
        new iam.PolicyStatement({ sid: 'OwnStacks', actions, resources: [stacksArn], conditions: { StringEqualsIfExists: ours } }),
      changeSets: () =>
        new iam.PolicyStatement({
          sid: 'ChangeSets',
          actions: ['cloudformation:CreateChangeSet'],
          resources: [stacksArn],
          conditions: { StringEquals: { [`aws:RequestTag/${INSTALLATION_TAG}`]: this.table.tableName }, StringEqualsIfExists: ours },
        }),
      listStacks: () => new iam.PolicyStatement({ sid: 'ListStacks', actions: ['cloudformation:ListStacks'], resources: ['*'] }),
      drift: () =>
        new iam.PolicyStatement({
          sid: 'Drift',
          actions: ['cloudformation:DetectStackDrift', 'cloudformation:DescribeStackResourceDrifts'],
          resources: [stacksArn],
        }),
      driftDetections: () =>
        new iam.PolicyStatement({
          sid: 'DriftDetections',
          actions: ['cloudformation:DescribeStackDriftDetectionStatus'],
          resources: ['*'],
        }),
      transforms: () =>
        new iam.PolicyStatement({ sid: 'Transforms', actions: ['cloudformation:CreateChangeSet'], resources: [this.transformsArn()] }),
      passServiceRoles: () =>
        this.cloudFormationRoleArns.length === 0
          ? []
          : [
              new iam.PolicyStatement({
                sid: 'PassServiceRoles',
                actions: ['iam:PassRole'],
                resources: this.cloudFormationRoleArns,
                conditions: { StringEquals: { 'iam:PassedToService': 'cloudformation.amazonaws.com' } },
              }),
            ],
      assumeTargetRoles: () =>
        this.targetAccountRoleArns.length === 0
          ? []
          : [
              new iam.PolicyStatement({
                sid: 'TargetAccounts',
                actions: ['sts:AssumeRole', 'sts:TagSession'],
                resources: this.targetAccountRoleArns,
              }),
            ],
      putEvents: () =>
        this.eventBusName === 'none'
          ? []
          : [
              new iam.PolicyStatement({
                sid: 'Events',
                actions: ['events:PutEvents'],
                resources: [Stack.of(this).formatArn({ service: 'events', resource: 'event-bus', resourceName: this.eventBusName })],
                conditions: { StringEquals: { 'events:source': 'stacksync' } },
              }),
            ],
      table: (sid, ...actions) => new iam.PolicyStatement({ sid, actions, resources: [this.table.tableArn] }),
      deliveries: () =>
        new iam.PolicyStatement({
          sid: 'Deliveries',
          actions: ['dynamodb:PutItem'],
          resources: [this.table.tableArn],
          conditions: {
            'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['delivery#*'] },
            'ForAllValues:StringEquals': { 'dynamodb:Attributes': ['pk', 'expiresAt'] },
            StringEqualsIfExists: { 'dynamodb:ReturnValues': 'NONE' },
          },
        }),
      keys: (sid, actions, keyPrefixes, attributes) =>
        new iam.PolicyStatement({
          sid,
          actions,
          resources: [this.table.tableArn],
          conditions: {
            'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': keyPrefixes.map((k) => `${k}*`) },
            'ForAllValues:StringEquals': { 'dynamodb:Attributes': attributes },
            StringEqualsIfExists: { 'dynamodb:ReturnValues': 'NONE' },
          },
        }),
      followers: () =>
        new iam.PolicyStatement({
          sid: 'SourceIndex',
          actions: ['dynamodb:Query'],
          resources: [`${this.table.tableArn}/index/by-source`],
          conditions: {
            'ForAllValues:StringEquals': { 'dynamodb:Attributes': FOLLOWER_ATTRIBUTES },
            StringEquals: { 'dynamodb:Select': 'SPECIFIC_ATTRIBUTES' },
          },
        }),
      index: (sid, indexName, ...actions) => {
        if (!REGISTRY_INDEXES.includes(indexName)) {
          throw new Error(`${spec.id}: the registry has no index "${indexName}" (${REGISTRY_INDEXES.join(', ')})`);
        }
        return new iam.PolicyStatement({ sid, actions, resources: [`${this.table.tableArn}/index/${indexName}`] });
      },
      startReconcile: () =>
        new iam.PolicyStatement({
          sid: 'StartReconcile',
          actions: ['states:StartExecution'],
          resources: [this.machineFor(spec).stateMachineArn],
        }),
      webhookSecret: () =>
        this.webhookSecretArn === undefined
          ? []
          : [
              new iam.PolicyStatement({
                sid: 'Secret',
                actions: ['secretsmanager:GetSecretValue'],
                resources: [this.webhookSecretArn],
              }),
            ],
      sourceSecrets: () =>
        this.sourceSecretArns.length === 0
          ? []
          : [new iam.PolicyStatement({ sid: 'SourceSecrets', actions: ['secretsmanager:GetSecretValue'], resources: this.sourceSecretArns })],
      sourceParameters: () =>
        this.sourceParameterArns.length === 0
          ? []
          : [new iam.PolicyStatement({ sid: 'SourceParameters', actions: ['ssm:GetParameter'], resources: this.sourceParameterArns })],
      valueSecrets: () =>
        this.valueSecretArns.length === 0
          ? []
          : [new iam.PolicyStatement({ sid: 'ValueSecrets', actions: ['secretsmanager:GetSecretValue'], resources: this.valueSecretArns })],
      valueParameters: () =>
        this.valueParameterArns.length === 0
          ? []
          : [new iam.PolicyStatement({ sid: 'ValueParameters', actions: ['ssm:GetParameter'], resources: this.valueParameterArns })],
      sourceObjects: () =>
        this.sourceBucketNames.length === 0
          ? []
          : [
              new iam.PolicyStatement({
                sid: 'SourceObjects',
                actions: ['s3:GetObject', 's3:GetObjectVersion'],
                resources: this.sourceBucketNames.map((b) => this.sourceObjectsArn(b)),
              }),
            ],
      sourceBuckets: () =>
        this.sourceBucketNames.length === 0
          ? []
          : [
              new iam.PolicyStatement({
                sid: 'SourceBuckets',
                actions: ['s3:ListBucket'],
                resources: this.sourceBucketNames.map((b) => this.sourceBucketArn(b)),
              }),
            ],
      codeCommit: () =>
        this.codeCommitRepositoryArns.length === 0
          ? []
          : [new iam.PolicyStatement({ sid: 'CodeCommit', actions: ['codecommit:GitPull'], resources: this.codeCommitRepositoryArns })],
      answerTokens: () =>
        new iam.PolicyStatement({
          sid: 'AnswerTokens',
          actions: ['states:SendTaskSuccess', 'states:SendTaskFailure'],
          resources: ['*'],
        }),
    };
  }

  /**
   * One AwsSolutions-IAM5 suppression per wildcard resource of a role, each
   * with the reason for that kind of resource. A wildcard of an unknown kind
   * fails the synthesis: a new function must say why it needs it.
   */
  private wildcardSuppressions(spec: FunctionSpec, statements: iam.PolicyStatement[]): NagPackSuppression[] {
    const bucketArn = nagFinding(this.resolve(this.bucket.bucketArn));
    const stacks = nagFinding(this.resolve(this.stacksArn()));
    const sourceObjects = new Map(this.sourceBucketNames.map((b) => [nagFinding(this.resolve(this.sourceObjectsArn(b))), b]));
    // The wildcard ARNs the operator wrote: which secrets, parameters and repositories is the operator's choice.
    // By statement: the same ARN may be in a private source's list and in a stack parameter's.
    const gitCredentials =
      "which Git credentials and repositories the private sources may use is the operator's choice (every secret " +
      'under a path, the six random characters Secrets Manager appends to a name, ...)';
    const parameterValues =
      "which secrets and parameters the stacks' parameters may read is the operator's choice (every secret or " +
      'parameter under a path, the six random characters Secrets Manager appends to a name, ...)';
    const operatorPatterns = new Map<string, { prop: string; arns: string[]; why: string }>([
      ['SourceSecrets', { prop: 'sourceSecretArns', arns: this.sourceSecretArns, why: gitCredentials }],
      ['SourceParameters', { prop: 'sourceParameterArns', arns: this.sourceParameterArns, why: gitCredentials }],
      ['CodeCommit', { prop: 'codeCommitRepositoryArns', arns: this.codeCommitRepositoryArns, why: gitCredentials }],
      ['ValueSecrets', { prop: 'valueSecretArns', arns: this.valueSecretArns, why: parameterValues }],
      ['ValueParameters', { prop: 'valueParameterArns', arns: this.valueParameterArns, why: parameterValues }],
    ]);
    const found = new Map<string, string>();
    // One suppression per finding: `*` may be the resource of more than one statement (ListStacks, DriftDetections).
    const addReason = (flat: string, reason: string) => {
      const before = found.get(flat);
      found.set(flat, before === undefined || before === reason ? reason : `${before} ${reason}`);
    };
    for (const statement of statements) {
      const operator = statement.sid === undefined ? undefined : operatorPatterns.get(statement.sid);
      for (const resource of statement.resources) {
        const flat = nagFinding(this.resolve(resource));
        if (!flat.includes('*')) continue;
        const prefix = flat.startsWith(`${bucketArn}/`) ? flat.slice(bucketArn.length + 1) : undefined;
        if (flat === '*' && statement.actions.every((a) => a === 'cloudformation:ListStacks')) {
          addReason(
            flat,
            'cloudformation:ListStacks supports no resource-level permission (the Service Authorization Reference ' +
              "lists none): the scheduler's health check and the drift function list every stack of an account and " +
              'region once per run and compare those they manage. As in template.yaml.',
          );
        } else if (flat === '*' && statement.actions.every((a) => a === 'cloudformation:DescribeStackDriftDetectionStatus')) {
          addReason(
            flat,
            'cloudformation:DescribeStackDriftDetectionStatus names a drift detection id, not a stack, and supports ' +
              'no resource-level permission (the Service Authorization Reference lists none): the drift function asks ' +
              'how the detections it started go. As in template.yaml.',
          );
        } else if (flat === '*' && statement.actions.every((a) => a === 'states:SendTaskSuccess' || a === 'states:SendTaskFailure')) {
          addReason(
            flat,
            'states:SendTaskSuccess and states:SendTaskFailure name a task token, not a state machine or an ' +
              'execution, and support no resource-level permission (the Service Authorization Reference lists ' +
              'none): the answer function answers the token of the wait a verified approver answered. The tokens\' ' +
              'secrecy is what limits them: the bucket\'s policy lets only the approval function write them and only ' +
              'the answer function read them. As in template.yaml.',
          );
        } else if (flat === nagFinding(this.resolve(this.transformsArn()))) {
          found.set(
            flat,
            'CloudFormation authorizes a template with a transform (AWS::Serverless, AWS::Include, ' +
              'AWS::LanguageExtensions, ...) as CreateChangeSet on the AWS-owned transform; which transforms the ' +
              "managed templates use is up to them, and the account in these ARNs is always AWS's own. As in template.yaml.",
          );
        } else if (flat === stacks) {
          found.set(
            flat,
            'The managed stacks are named at run time (the registry), and a CloudFormation stack ARN ends in a ' +
              `generated id: stack/${this.stackNamePrefix}*/* is the narrowest ARN (stackNamePrefix narrows the ` +
              'names); the region is * because an entry may name any region (stacks.yaml `region`). As in template.yaml.',
          );
        } else if (prefix !== undefined && /^approvals\/(tokens|answers)\/\*$/.test(prefix)) {
          found.set(
            flat,
            `Objects under ${prefix} of the stack's own artifact bucket: one per approval wait, keyed by a hash of ` +
              'the entry and the run (made at run time), so the prefix is the narrowest resource; the bucket\'s ' +
              'policy lets only the approval function write tokens, only the answer function read them and only it ' +
              'write answers. As in template.yaml.',
          );
        } else if (prefix !== undefined && /^[a-z]+\/\*$/.test(prefix)) {
          found.set(
            flat,
            `Objects under ${prefix} of the stack's own artifact bucket: their keys are made at run time (source ` +
              'hash and Git revision, template and parameter hashes), so the prefix is the narrowest resource. As in ' +
              'template.yaml.',
          );
        } else if (sourceObjects.has(flat)) {
          found.set(
            flat,
            `Objects of ${sourceObjects.get(flat)}, a source bucket the operator listed (sourceBucketNames): S3 ` +
              "source archives are read by key and version, and which keys is up to the stacks' sources (the " +
              'registry, at run time), so any key of the listed buckets. As in template.yaml.',
          );
        } else if (operator !== undefined && operator.arns.includes(flat)) {
          found.set(flat, `The operator's own pattern, written into ${operator.prop}: ${operator.why}. As in template.yaml.`);
        } else {
          throw new Error(`${spec.id}: wildcard resource ${flat} has no reason; add one in wildcardSuppressions`);
        }
      }
    }
    return [...found].map(([flat, reason]) => ({ id: 'AwsSolutions-IAM5', appliesTo: [`Resource::${flat}`], reason }));
  }

  /** One AwsSolutions-IAM5 suppression per wildcard resource of a customer managed policy, with its reason. */
  private customerPolicySuppressions(policy: CustomerManagedPolicy): NagPackSuppression[] {
    const wildcards = new Set(
      policy.statements.flatMap((st) => st.resources.map((r) => nagFinding(this.resolve(r)))).filter((r) => r.includes('*')),
    );
    return [...wildcards].map((flat) => ({ id: 'AwsSolutions-IAM5', appliesTo: [`Resource::${flat}`], reason: policy.wildcardReason }));
  }

  /** arn:PARTITION:s3:::BUCKET, a source bucket (S3 ARNs name no region or account). */
  private sourceBucketArn(bucket: string): string {
    return `arn:${Aws.PARTITION}:s3:::${bucket}`;
  }

  /** arn:PARTITION:s3:::BUCKET/*, every object of a source bucket. */
  private sourceObjectsArn(bucket: string): string {
    return `${this.sourceBucketArn(bucket)}/*`;
  }

  /** arn:PARTITION:cloudformation:*:aws:transform/* (the AWS-owned transforms, any region). */
  private transformsArn(): string {
    return this.formatArn({ service: 'cloudformation', region: '*', account: 'aws', resource: 'transform', resourceName: '*' });
  }

  /** arn:PARTITION:cloudformation:*:ACCOUNT:stack/<stackNamePrefix>*\/* */
  private stacksArn(): string {
    return this.formatArn({
      service: 'cloudformation',
      region: '*',
      resource: 'stack',
      resourceName: `${this.stackNamePrefix}*/*`,
    });
  }
}

/** The prop `name`'s ARNs without duplicates; one not matching `pattern` is refused as not `what`. */
function checkArns(name: string, arns: string[] | undefined, pattern: RegExp, what: string): string[] {
  const list = arns ?? [];
  for (const arn of list) {
    if (!pattern.test(arn)) throw new Error(`${name}: "${arn}" is not ${what}`);
  }
  return [...new Set(list)];
}
