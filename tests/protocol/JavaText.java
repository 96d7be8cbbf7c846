// The JDK's own reading of text, for tests/protocol/test_java_text.py: what Integer.parseInt,
// Long.parseLong and new String(bytes, UTF_8) make of each input, and how a compressed
// RegisterBrokerBody's topic entry reads (semantics spec section 8: split at spaces, at least five
// fields, three ints, a TopicFilterType name). Run as a source file: java JavaText.java
//
// Input: one case a line, "<op> <hex of the bytes>". Output: one line a case, the result or ERR.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;

public class JavaText {
    enum FilterType { SINGLE_TAG, MULTI_TAG }

    static String hex(String text) {
        StringBuilder out = new StringBuilder();
        for (byte b : text.getBytes(StandardCharsets.UTF_8)) {
            out.append(String.format("%02x", b));
        }
        return out.toString();
    }

    static byte[] bytes(String hex) {
        byte[] out = new byte[hex.length() / 2];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }

    static String entry(String text) {
        String[] fields = text.split(" ");
        if (fields.length < 5) {
            return "ERR";
        }
        int read = Integer.parseInt(fields[1]);
        int write = Integer.parseInt(fields[2]);
        int perm = Integer.parseInt(fields[3]);
        FilterType type = FilterType.valueOf(fields[4]);
        return hex(fields[0]) + " " + read + " " + write + " " + perm + " " + type.name();
    }

    static String apply(String op, String text) {
        try {
            switch (op) {
                case "int": return Integer.toString(Integer.parseInt(text));
                case "long": return Long.toString(Long.parseLong(text));
                case "string": return hex(text);
                case "entry": return entry(text);
                default: throw new IllegalStateException("unknown op " + op);
            }
        } catch (IllegalArgumentException e) {  // NumberFormatException, or no such enum constant
            return "ERR";
        }
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.split(" ", -1);
            out.append(apply(parts[0], new String(bytes(parts[1]), StandardCharsets.UTF_8))).append('\n');
        }
        System.out.print(out);
    }
}
