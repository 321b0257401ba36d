package io.scd.hadoop;

/** Hadoop's local filesystem (checksummed) over {@link RawLocalFileSystem}: {@code fs.file.impl}. */
public class LocalFileSystem extends org.apache.hadoop.fs.LocalFileSystem {
  public LocalFileSystem() {
    super(new RawLocalFileSystem());
  }
}
