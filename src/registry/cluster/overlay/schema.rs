//! The lists and structs of the five kinds that do not simply merge as maps: the
//! `patchStrategy`/`patchMergeKey` markers of Kubernetes' types (`core/v1`, `apps/v1`,
//! `autoscaling/v2`, `policy/v1`, `meta/v1`), by JSON field, struct by struct from each
//! kind's root, as apimachinery's `PatchMetaFromStruct` looks them up. E.g. a Deployment's
//! `spec.template.spec.containers` merges by `name` and its elements' `env` by `name`; a list
//! not in these tables (`args`, `spec.template.spec.tolerations`…) is replaced.

/// How a field merges (the Kubernetes types' `patchStrategy`/`patchMergeKey` markers);
/// a field not in its struct's table merges as a map or is replaced.
#[derive(Debug, Clone, Copy)]
pub(super) enum Field {
    /// A struct, whose fields merge by the table.
    Struct(Schema),
    /// A list of objects merged element-wise by the key, the elements by the table.
    Keyed(&'static str, Schema),
    /// A list of scalars merged as a set (`patchStrategy: merge`, no key).
    Set,
    /// A struct the patch replaces whole (`patchStrategy: replace`).
    Replace,
}

/// A struct's fields that do not simply merge as maps, by JSON name.
pub(super) type Schema = &'static [(&'static str, Field)];

pub(super) const NONE: Schema = &[];
const OBJECT_META: Schema = &[
    ("ownerReferences", Field::Keyed("uid", NONE)),
    ("finalizers", Field::Set),
];
const CONDITIONS: Schema = &[("conditions", Field::Keyed("type", NONE))];
const CONTAINER: Schema = &[
    ("ports", Field::Keyed("containerPort", NONE)),
    ("env", Field::Keyed("name", NONE)),
    ("volumeMounts", Field::Keyed("mountPath", NONE)),
    ("volumeDevices", Field::Keyed("devicePath", NONE)),
];
const POD_SPEC: Schema = &[
    // `merge,retainKeys`: `$retainKeys` applies wherever a patch map has it.
    ("volumes", Field::Keyed("name", NONE)),
    ("initContainers", Field::Keyed("name", CONTAINER)),
    ("containers", Field::Keyed("name", CONTAINER)),
    ("ephemeralContainers", Field::Keyed("name", CONTAINER)),
    ("imagePullSecrets", Field::Keyed("name", NONE)),
    ("hostAliases", Field::Keyed("ip", NONE)),
    (
        "topologySpreadConstraints",
        Field::Keyed("topologyKey", NONE),
    ),
    ("schedulingGates", Field::Keyed("name", NONE)),
    ("resourceClaims", Field::Keyed("name", NONE)),
    ("evictionResponders", Field::Keyed("name", NONE)),
];
const POD_TEMPLATE: Schema = &[
    ("metadata", Field::Struct(OBJECT_META)),
    ("spec", Field::Struct(POD_SPEC)),
];
pub(super) const DEPLOYMENT: Schema = &[
    ("metadata", Field::Struct(OBJECT_META)),
    (
        "spec",
        Field::Struct(&[("template", Field::Struct(POD_TEMPLATE))]),
    ),
    ("status", Field::Struct(CONDITIONS)),
];
pub(super) const SERVICE: Schema = &[
    ("metadata", Field::Struct(OBJECT_META)),
    (
        "spec",
        Field::Struct(&[("ports", Field::Keyed("port", NONE))]),
    ),
    ("status", Field::Struct(CONDITIONS)),
];
pub(super) const SERVICE_ACCOUNT: Schema = &[
    ("metadata", Field::Struct(OBJECT_META)),
    ("secrets", Field::Keyed("name", NONE)),
];
/// The HorizontalPodAutoscaler's.
pub(super) const WITH_CONDITIONS: Schema = &[
    ("metadata", Field::Struct(OBJECT_META)),
    ("status", Field::Struct(CONDITIONS)),
];
pub(super) const PDB: Schema = &[
    ("metadata", Field::Struct(OBJECT_META)),
    ("spec", Field::Struct(&[("selector", Field::Replace)])),
    ("status", Field::Struct(CONDITIONS)),
];

pub(super) fn field(schema: Schema, name: &str) -> Option<Field> {
    schema.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}
