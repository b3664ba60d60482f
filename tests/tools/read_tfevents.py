#!/usr/bin/python3
"""Reads TensorBoard event files back, independently of tandem's writer: checks the TFRecord
framing and both masked CRC32Cs of every record (python3-crc32c), parses each Event with
protobuf message classes built here from TensorBoard's field numbers (python3-protobuf), and
prints "file_version VERSION" and one "TAG STEP VALUE" line per scalar. Exits 1 on any damage."""
import struct
import sys

import crc32c
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory


def masked(data):
    crc = crc32c.crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def event_class():
    f = descriptor_pb2.FileDescriptorProto(name="tb_reader.proto", package="tbreader",
                                           syntax="proto3")
    T = descriptor_pb2.FieldDescriptorProto
    value = f.message_type.add(name="Value")
    value.field.add(name="tag", number=1, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    value.field.add(name="simple_value", number=2, type=T.TYPE_FLOAT, label=T.LABEL_OPTIONAL)
    summary = f.message_type.add(name="Summary")
    summary.field.add(name="value", number=1, type=T.TYPE_MESSAGE, label=T.LABEL_REPEATED,
                      type_name=".tbreader.Value")
    event = f.message_type.add(name="Event")
    event.field.add(name="wall_time", number=1, type=T.TYPE_DOUBLE, label=T.LABEL_OPTIONAL)
    event.field.add(name="step", number=2, type=T.TYPE_INT64, label=T.LABEL_OPTIONAL)
    event.field.add(name="file_version", number=3, type=T.TYPE_STRING, label=T.LABEL_OPTIONAL)
    event.field.add(name="summary", number=5, type=T.TYPE_MESSAGE, label=T.LABEL_OPTIONAL,
                    type_name=".tbreader.Summary")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.MessageFactory(pool).GetPrototype(
        pool.FindMessageTypeByName("tbreader.Event"))


def main(path):
    Event = event_class()
    data = open(path, "rb").read()
    at = 0
    while at < len(data):
        if at + 12 > len(data):
            sys.exit(f"{path}: a record header is cut at byte {at}")
        header = data[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        if length_crc != masked(header):
            sys.exit(f"{path}: the length CRC at byte {at} is wrong")
        body = data[at + 12:at + 12 + length]
        (body_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        if len(body) != length or body_crc != masked(body):
            sys.exit(f"{path}: the data CRC of the record at byte {at} is wrong")
        event = Event()
        event.ParseFromString(body)
        if event.file_version:
            print("file_version", event.file_version)
        for v in event.summary.value:
            print(v.tag, event.step, repr(v.simple_value))
        at += 16 + length


if __name__ == "__main__":
    main(sys.argv[1])
