//! The ONNX messages the exporter writes, as prost types. GENERATED, do not edit by hand.
//!
//! Source: `onnx/onnx.proto` of the PyPI `onnx` 1.23.2 wheel (ONNX's own definition, proto2,
//! `SPDX-License-Identifier: Apache-2.0`, copyright the ONNX Project Contributors).
//! Generated once with prost-build 0.14.6 from the descriptor set protox 0.10 compiles from that
//! file (so no protoc), comments off, keeping only the messages an exporter needs: ModelProto,
//! GraphProto, NodeProto, AttributeProto, ValueInfoProto, TensorProto, TensorShapeProto,
//! TypeProto (tensor types only), OperatorSetIdProto, StringStringEntryProto; fields whose type
//! is a dropped message (functions, training info, sparse tensors, sharding, device
//! configurations, non-tensor types) are left out, and every kept field keeps its tag, so the
//! bytes are ordinary ONNX. To regenerate: a throwaway binary that calls
//! `protox::compile(["onnx.proto"], ["."])`, removes those messages and fields from the
//! `FileDescriptorSet`, and passes it to `prost_build::Config::new().disable_comments(["."])
//! .compile_fds(..)`.
#![allow(clippy::all, clippy::pedantic, missing_docs, dead_code)]

#[derive(Clone, PartialEq, ::prost::Message)]
pub struct AttributeProto {
    #[prost(string, optional, tag = "1")]
    pub name: ::core::option::Option<::prost::alloc::string::String>,
    #[prost(string, optional, tag = "21")]
    pub ref_attr_name: ::core::option::Option<::prost::alloc::string::String>,
    #[prost(string, optional, tag = "13")]
    pub doc_string: ::core::option::Option<::prost::alloc::string::String>,
    #[prost(enumeration = "attribute_proto::AttributeType", optional, tag = "20")]
    pub r#type: ::core::option::Option<i32>,
    #[prost(float, optional, tag = "2")]
    pub f: ::core::option::Option<f32>,
    #[prost(int64, optional, tag = "3")]
    pub i: ::core::option::Option<i64>,
    #[prost(bytes = "vec", optional, tag = "4")]
    pub s: ::core::option::Option<::prost::alloc::vec::Vec<u8>>,
    #[prost(message, optional, tag = "5")]
    pub t: ::core::option::Option<TensorProto>,
    #[prost(message, optional, tag = "6")]
    pub g: ::core::option::Option<GraphProto>,
    #[prost(message, optional, tag = "14")]
    pub tp: ::core::option::Option<TypeProto>,
    #[prost(float, repeated, packed = "false", tag = "7")]
    pub floats: ::prost::alloc::vec::Vec<f32>,
    #[prost(int64, repeated, packed = "false", tag = "8")]
    pub ints: ::prost::alloc::vec::Vec<i64>,
    #[prost(bytes = "vec", repeated, tag = "9")]
    pub strings: ::prost::alloc::vec::Vec<::prost::alloc::vec::Vec<u8>>,
    #[prost(message, repeated, tag = "10")]
    pub tensors: ::prost::alloc::vec::Vec<TensorProto>,
    #[prost(message, repeated, tag = "11")]
    pub graphs: ::prost::alloc::vec::Vec<GraphProto>,
    #[prost(message, repeated, tag = "15")]
    pub type_protos: ::prost::alloc::vec::Vec<TypeProto>,
}
/// Nested message and enum types in `AttributeProto`.
pub mod attribute_proto {
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
    #[repr(i32)]
    pub enum AttributeType {
        Undefined = 0,
        Float = 1,
        Int = 2,
        String = 3,
        Tensor = 4,
        Graph = 5,
        SparseTensor = 11,
        TypeProto = 13,
        Floats = 6,
        Ints = 7,
        Strings = 8,
        Tensors = 9,
        Graphs = 10,
        SparseTensors = 12,
        TypeProtos = 14,
    }
    impl AttributeType {
        /// String value of the enum field names used in the ProtoBuf definition.
        ///
        /// The values are not transformed in any way and thus are considered stable
        /// (if the ProtoBuf definition does not change) and safe for programmatic use.
        pub fn as_str_name(&self) -> &'static str {
            match self {
                Self::Undefined => "UNDEFINED",
                Self::Float => "FLOAT",
                Self::Int => "INT",
                Self::String => "STRING",
                Self::Tensor => "TENSOR",
                Self::Graph => "GRAPH",
                Self::SparseTensor => "SPARSE_TENSOR",
                Self::TypeProto => "TYPE_PROTO",
                Self::Floats => "FLOATS",
                Self::Ints => "INTS",
                Self::Strings => "STRINGS",
                Self::Tensors => "TENSORS",
                Self::Graphs => "GRAPHS",
                Self::SparseTensors => "SPARSE_TENSORS",
                Self::TypeProtos => "TYPE_PROTOS",
            }
        }
        /// Creates an enum from field names used in the ProtoBuf definition.
        pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
            match value {
                "UNDEFINED" => Some(Self::Undefined),
                "FLOAT" => Some(Self::Float),
                "INT" => Some(Self::Int),
                "STRING" => Some(Self::String),
                "TENSOR" => Some(Self::Tensor),
                "GRAPH" => Some(Self::Graph),
                "SPARSE_TENSOR" => Some(Self::SparseTensor),
                "TYPE_PROTO" => Some(Self::TypeProto),
                "FLOATS" => Some(Self::Floats),
                "INTS" => Some(Self::Ints),
                "STRINGS" => Some(Self::Strings),
                "TENSORS" => Some(Self::Tensors),
                "GRAPHS" => Some(Self::Graphs),
                "SPARSE_TENSORS" => Some(Self::SparseTensors),
                "TYPE_PROTOS" => Some(Self::TypeProtos),
                _ => None,
            }
        }
    }
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ValueInfoProto {
    #[prost(string, optional, tag = "1")]
    pub name: ::core::option::Option<::prost::alloc::string::String>,
    #[prost(message, optional, tag = "2")]
    pub r#type: ::core::option::Option<TypeProto>,
    #[prost(string, optional, tag = "3")]
    pub doc_string: ::core::option::Option<::prost::alloc::string::String>,
    #[prost(message, repeated, tag = "4")]
    pub metadata_props: ::prost::alloc::vec::Vec<StringStringEntryProto>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct NodeProto {
    #[prost(string, repeated, tag = "1")]
    pub input: ::prost::alloc::vec::Vec<::prost::alloc::string::String>,
    #[prost(string, repeated, tag = "2")]
    pub output: ::prost::alloc::vec::Vec<::prost::alloc::string::String>,
    #[prost(string, optional, tag = "3")]
    pub name: ::core::option::Option<::prost::alloc::string::String>,
    #[prost(string, optional, tag = "4")]
    pub op_type: ::core::option::Option<::prost::alloc::string::String>,
    #[prost(string, optional, tag = "7")]
    pub domain: ::core::option::Option<::prost::alloc::string::String>,
    #[prost(string, optional, tag = "8")]
    pub overload: ::core::option::Option<::prost::alloc::string::String>,
    #[prost(message, repeated, tag = "5")]
    pub attribute: ::prost::alloc::vec::Vec<AttributeProto>,
    #[prost(string, optional, tag = "6")]
    pub doc_string: ::core::option::Option<::prost::alloc::string::String>,
    #[prost(message, repeated, tag = "9")]
    pub metadata_props: ::prost::alloc::vec::Vec<StringStringEntryProto>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct ModelProto {
    #[prost(int64, optional, tag = "1")]
    pub ir_version: ::core::option::Option<i64>,
    #[prost(message, repeated, tag = "8")]
    pub opset_import: ::prost::alloc::vec::Vec<OperatorSetIdProto>,
    #[prost(string, optional, tag = "2")]
    pub producer_name: ::core::option::Option<::prost::alloc::string::String>,
    #[prost(string, optional, tag = "3")]
    pub producer_version: ::core::option::Option<::prost::alloc::string::String>,
    #[prost(string, optional, tag = "4")]
    pub domain: ::core::option::Option<::prost::alloc::string::String>,
    #[prost(int64, optional, tag = "5")]
    pub model_version: ::core::option::Option<i64>,
    #[prost(string, optional, tag = "6")]
    pub doc_string: ::core::option::Option<::prost::alloc::string::String>,
    #[prost(message, optional, tag = "7")]
    pub graph: ::core::option::Option<GraphProto>,
    #[prost(message, repeated, tag = "14")]
    pub metadata_props: ::prost::alloc::vec::Vec<StringStringEntryProto>,
}
#[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
pub struct StringStringEntryProto {
    #[prost(string, optional, tag = "1")]
    pub key: ::core::option::Option<::prost::alloc::string::String>,
    #[prost(string, optional, tag = "2")]
    pub value: ::core::option::Option<::prost::alloc::string::String>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct GraphProto {
    #[prost(message, repeated, tag = "1")]
    pub node: ::prost::alloc::vec::Vec<NodeProto>,
    #[prost(string, optional, tag = "2")]
    pub name: ::core::option::Option<::prost::alloc::string::String>,
    #[prost(message, repeated, tag = "5")]
    pub initializer: ::prost::alloc::vec::Vec<TensorProto>,
    #[prost(string, optional, tag = "10")]
    pub doc_string: ::core::option::Option<::prost::alloc::string::String>,
    #[prost(message, repeated, tag = "11")]
    pub input: ::prost::alloc::vec::Vec<ValueInfoProto>,
    #[prost(message, repeated, tag = "12")]
    pub output: ::prost::alloc::vec::Vec<ValueInfoProto>,
    #[prost(message, repeated, tag = "13")]
    pub value_info: ::prost::alloc::vec::Vec<ValueInfoProto>,
    #[prost(message, repeated, tag = "16")]
    pub metadata_props: ::prost::alloc::vec::Vec<StringStringEntryProto>,
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct TensorProto {
    #[prost(int64, repeated, packed = "false", tag = "1")]
    pub dims: ::prost::alloc::vec::Vec<i64>,
    #[prost(int32, optional, tag = "2")]
    pub data_type: ::core::option::Option<i32>,
    #[prost(message, optional, tag = "3")]
    pub segment: ::core::option::Option<tensor_proto::Segment>,
    #[prost(float, repeated, tag = "4")]
    pub float_data: ::prost::alloc::vec::Vec<f32>,
    #[prost(int32, repeated, tag = "5")]
    pub int32_data: ::prost::alloc::vec::Vec<i32>,
    #[prost(bytes = "vec", repeated, tag = "6")]
    pub string_data: ::prost::alloc::vec::Vec<::prost::alloc::vec::Vec<u8>>,
    #[prost(int64, repeated, tag = "7")]
    pub int64_data: ::prost::alloc::vec::Vec<i64>,
    #[prost(string, optional, tag = "8")]
    pub name: ::core::option::Option<::prost::alloc::string::String>,
    #[prost(string, optional, tag = "12")]
    pub doc_string: ::core::option::Option<::prost::alloc::string::String>,
    #[prost(bytes = "vec", optional, tag = "9")]
    pub raw_data: ::core::option::Option<::prost::alloc::vec::Vec<u8>>,
    #[prost(message, repeated, tag = "13")]
    pub external_data: ::prost::alloc::vec::Vec<StringStringEntryProto>,
    #[prost(enumeration = "tensor_proto::DataLocation", optional, tag = "14")]
    pub data_location: ::core::option::Option<i32>,
    #[prost(double, repeated, tag = "10")]
    pub double_data: ::prost::alloc::vec::Vec<f64>,
    #[prost(uint64, repeated, tag = "11")]
    pub uint64_data: ::prost::alloc::vec::Vec<u64>,
    #[prost(message, repeated, tag = "16")]
    pub metadata_props: ::prost::alloc::vec::Vec<StringStringEntryProto>,
}
/// Nested message and enum types in `TensorProto`.
pub mod tensor_proto {
    #[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct Segment {
        #[prost(int64, optional, tag = "1")]
        pub begin: ::core::option::Option<i64>,
        #[prost(int64, optional, tag = "2")]
        pub end: ::core::option::Option<i64>,
    }
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
    #[repr(i32)]
    pub enum DataType {
        Undefined = 0,
        Float = 1,
        Uint8 = 2,
        Int8 = 3,
        Uint16 = 4,
        Int16 = 5,
        Int32 = 6,
        Int64 = 7,
        String = 8,
        Bool = 9,
        Float16 = 10,
        Double = 11,
        Uint32 = 12,
        Uint64 = 13,
        Complex64 = 14,
        Complex128 = 15,
        Bfloat16 = 16,
        Float8e4m3fn = 17,
        Float8e4m3fnuz = 18,
        Float8e5m2 = 19,
        Float8e5m2fnuz = 20,
        Uint4 = 21,
        Int4 = 22,
        Float4e2m1 = 23,
        Float8e8m0 = 24,
        Uint2 = 25,
        Int2 = 26,
        Float6e2m3 = 27,
        Float6e3m2 = 28,
    }
    impl DataType {
        /// String value of the enum field names used in the ProtoBuf definition.
        ///
        /// The values are not transformed in any way and thus are considered stable
        /// (if the ProtoBuf definition does not change) and safe for programmatic use.
        pub fn as_str_name(&self) -> &'static str {
            match self {
                Self::Undefined => "UNDEFINED",
                Self::Float => "FLOAT",
                Self::Uint8 => "UINT8",
                Self::Int8 => "INT8",
                Self::Uint16 => "UINT16",
                Self::Int16 => "INT16",
                Self::Int32 => "INT32",
                Self::Int64 => "INT64",
                Self::String => "STRING",
                Self::Bool => "BOOL",
                Self::Float16 => "FLOAT16",
                Self::Double => "DOUBLE",
                Self::Uint32 => "UINT32",
                Self::Uint64 => "UINT64",
                Self::Complex64 => "COMPLEX64",
                Self::Complex128 => "COMPLEX128",
                Self::Bfloat16 => "BFLOAT16",
                Self::Float8e4m3fn => "FLOAT8E4M3FN",
                Self::Float8e4m3fnuz => "FLOAT8E4M3FNUZ",
                Self::Float8e5m2 => "FLOAT8E5M2",
                Self::Float8e5m2fnuz => "FLOAT8E5M2FNUZ",
                Self::Uint4 => "UINT4",
                Self::Int4 => "INT4",
                Self::Float4e2m1 => "FLOAT4E2M1",
                Self::Float8e8m0 => "FLOAT8E8M0",
                Self::Uint2 => "UINT2",
                Self::Int2 => "INT2",
                Self::Float6e2m3 => "FLOAT6E2M3",
                Self::Float6e3m2 => "FLOAT6E3M2",
            }
        }
        /// Creates an enum from field names used in the ProtoBuf definition.
        pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
            match value {
                "UNDEFINED" => Some(Self::Undefined),
                "FLOAT" => Some(Self::Float),
                "UINT8" => Some(Self::Uint8),
                "INT8" => Some(Self::Int8),
                "UINT16" => Some(Self::Uint16),
                "INT16" => Some(Self::Int16),
                "INT32" => Some(Self::Int32),
                "INT64" => Some(Self::Int64),
                "STRING" => Some(Self::String),
                "BOOL" => Some(Self::Bool),
                "FLOAT16" => Some(Self::Float16),
                "DOUBLE" => Some(Self::Double),
                "UINT32" => Some(Self::Uint32),
                "UINT64" => Some(Self::Uint64),
                "COMPLEX64" => Some(Self::Complex64),
                "COMPLEX128" => Some(Self::Complex128),
                "BFLOAT16" => Some(Self::Bfloat16),
                "FLOAT8E4M3FN" => Some(Self::Float8e4m3fn),
                "FLOAT8E4M3FNUZ" => Some(Self::Float8e4m3fnuz),
                "FLOAT8E5M2" => Some(Self::Float8e5m2),
                "FLOAT8E5M2FNUZ" => Some(Self::Float8e5m2fnuz),
                "UINT4" => Some(Self::Uint4),
                "INT4" => Some(Self::Int4),
                "FLOAT4E2M1" => Some(Self::Float4e2m1),
                "FLOAT8E8M0" => Some(Self::Float8e8m0),
                "UINT2" => Some(Self::Uint2),
                "INT2" => Some(Self::Int2),
                "FLOAT6E2M3" => Some(Self::Float6e2m3),
                "FLOAT6E3M2" => Some(Self::Float6e3m2),
                _ => None,
            }
        }
    }
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, ::prost::Enumeration)]
    #[repr(i32)]
    pub enum DataLocation {
        Default = 0,
        External = 1,
    }
    impl DataLocation {
        /// String value of the enum field names used in the ProtoBuf definition.
        ///
        /// The values are not transformed in any way and thus are considered stable
        /// (if the ProtoBuf definition does not change) and safe for programmatic use.
        pub fn as_str_name(&self) -> &'static str {
            match self {
                Self::Default => "DEFAULT",
                Self::External => "EXTERNAL",
            }
        }
        /// Creates an enum from field names used in the ProtoBuf definition.
        pub fn from_str_name(value: &str) -> ::core::option::Option<Self> {
            match value {
                "DEFAULT" => Some(Self::Default),
                "EXTERNAL" => Some(Self::External),
                _ => None,
            }
        }
    }
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct TensorShapeProto {
    #[prost(message, repeated, tag = "1")]
    pub dim: ::prost::alloc::vec::Vec<tensor_shape_proto::Dimension>,
}
/// Nested message and enum types in `TensorShapeProto`.
pub mod tensor_shape_proto {
    #[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
    pub struct Dimension {
        #[prost(string, optional, tag = "3")]
        pub denotation: ::core::option::Option<::prost::alloc::string::String>,
        #[prost(oneof = "dimension::Value", tags = "1, 2")]
        pub value: ::core::option::Option<dimension::Value>,
    }
    /// Nested message and enum types in `Dimension`.
    pub mod dimension {
        #[derive(Clone, PartialEq, Eq, Hash, ::prost::Oneof)]
        pub enum Value {
            #[prost(int64, tag = "1")]
            DimValue(i64),
            #[prost(string, tag = "2")]
            DimParam(::prost::alloc::string::String),
        }
    }
}
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct TypeProto {
    #[prost(string, optional, tag = "6")]
    pub denotation: ::core::option::Option<::prost::alloc::string::String>,
    #[prost(oneof = "type_proto::Value", tags = "1")]
    pub value: ::core::option::Option<type_proto::Value>,
}
/// Nested message and enum types in `TypeProto`.
pub mod type_proto {
    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct Tensor {
        #[prost(int32, optional, tag = "1")]
        pub elem_type: ::core::option::Option<i32>,
        #[prost(message, optional, tag = "2")]
        pub shape: ::core::option::Option<super::TensorShapeProto>,
    }
    #[derive(Clone, PartialEq, ::prost::Oneof)]
    pub enum Value {
        #[prost(message, tag = "1")]
        TensorType(Tensor),
    }
}
#[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
pub struct OperatorSetIdProto {
    #[prost(string, optional, tag = "1")]
    pub domain: ::core::option::Option<::prost::alloc::string::String>,
    #[prost(int64, optional, tag = "2")]
    pub version: ::core::option::Option<i64>,
}
