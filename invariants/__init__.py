"""The safety properties of the Kafka replication model: ELR, high-watermark and durability."""
