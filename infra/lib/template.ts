// template.yaml, read as CloudFormation reads it: YAML with the short forms of the intrinsic functions (`!Ref`,
// `!Sub`, `!GetAtt A.B`, ...) turned into their long forms (`{"Ref": ...}`, `{"Fn::GetAtt": ["A", "B"]}`), as the
// IAM conformance test reads it (tests/src/iam/policy.rs `load_template`).
import * as fs from 'node:fs';
import { isMap, isScalar, isSeq, parseDocument } from 'yaml';

/** A CloudFormation template in JSON form. */
export interface CfnTemplate {
  readonly Parameters?: Record<string, CfnParameterDeclaration>;
  readonly Resources: Record<string, { Type: string; Properties?: any; Metadata?: any; Condition?: string }>;
  readonly Outputs?: Record<string, { Description?: string; Value: unknown }>;
  readonly [section: string]: unknown;
}

/** A parameter's declaration (what CloudFormation checks a value against). */
export interface CfnParameterDeclaration {
  readonly Type: 'String' | 'Number' | 'CommaDelimitedList';
  readonly Default?: string | number;
  readonly AllowedPattern?: string;
  readonly AllowedValues?: (string | number)[];
  readonly MinValue?: number;
  readonly MaxValue?: number;
  readonly Description?: string;
}

/** The YAML node as JSON, a short-form tag (`!Ref x`) as its long form. */
function toJson(node: unknown): unknown {
  let value: unknown;
  if (isMap(node)) {
    value = Object.fromEntries(node.items.map((pair) => [String(isScalar(pair.key) ? pair.key.value : pair.key), toJson(pair.value)]));
  } else if (isSeq(node)) {
    value = node.items.map(toJson);
  } else if (isScalar(node)) {
    value = node.value;
  } else {
    value = node ?? null;
  }
  const tag = (node as { tag?: string } | null)?.tag;
  if (tag === undefined || !tag.startsWith('!')) return value;
  const name = tag.slice(1);
  if (name === 'Ref' || name === 'Condition') return { [name]: value };
  if (name === 'GetAtt' && typeof value === 'string') {
    const dot = value.indexOf('.');
    return { 'Fn::GetAtt': [value.slice(0, dot), value.slice(dot + 1)] };
  }
  return { [`Fn::${name}`]: value };
}

/** A CloudFormation template file (YAML or JSON), every intrinsic function in its long form. */
export function loadTemplate(file: string): CfnTemplate {
  const document = parseDocument(fs.readFileSync(file, 'utf8'), { uniqueKeys: true });
  if (document.errors.length > 0) throw new Error(`${file}: ${document.errors.map((e) => e.message).join('; ')}`);
  return toJson(document.contents) as CfnTemplate;
}

/** Where a template refers to a resource the SAM transform makes (`<Function>Role`, `<Function>Url`). */
export interface SamMadeReference {
  /** `Resources` or `Outputs`. */
  readonly section: string;
  /** The resource's or output's logical ID. */
  readonly logicalId: string;
  /** The path inside it (`Properties.Environment.Variables.X`, `Value`). */
  readonly path: string[];
  /** The `Fn::GetAtt` as the template writes it. */
  readonly value: { 'Fn::GetAtt': [string, string] };
}

/**
 * The template without its `Fn::GetAtt`s of resources it does not declare (those the SAM transform makes when
 * CloudFormation deploys it: a function's role `<Function>Role`, its URL `<Function>Url`), each replaced by
 * `placeholder`; and where they were. CDK's `CfnInclude` refuses a reference to a resource it cannot find, so they
 * are put back as overrides after the inclusion.
 */
export function withoutSamMadeReferences(template: CfnTemplate, placeholder: string): { template: CfnTemplate; references: SamMadeReference[] } {
  const declared = new Set(Object.keys(template.Resources));
  const references: SamMadeReference[] = [];
  const visit = (value: unknown, at: string[]): unknown => {
    if (Array.isArray(value)) return value.map((item, i) => visit(item, [...at, String(i)]));
    if (value === null || typeof value !== 'object') return value;
    const getAtt = (value as Record<string, unknown>)['Fn::GetAtt'];
    if (Object.keys(value).length === 1 && Array.isArray(getAtt) && !declared.has(String(getAtt[0]))) {
      const [section, logicalId, ...path] = at;
      references.push({ section, logicalId, path, value: { 'Fn::GetAtt': [String(getAtt[0]), String(getAtt[1])] } });
      return placeholder;
    }
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, visit(item, [...at, key])]));
  };
  const stripped = Object.fromEntries(
    Object.entries(template).map(([section, body]) => [section, section === 'Resources' || section === 'Outputs' ? visit(body, [section]) : body]),
  ) as CfnTemplate;
  return { template: stripped, references };
}
