/// A plain-text table with left-aligned, space-padded columns, for `check` output.
struct TextTable {
    var header: [String]
    var rows: [[String]] = []

    func render(indent: String = "") -> String {
        let widths = header.indices.map { column in
            ([header] + rows).map { $0.indices.contains(column) ? $0[column].count : 0 }.max() ?? 0
        }
        func line(_ cells: [String]) -> String {
            var text = indent
            for (column, cell) in cells.enumerated() {
                if column == cells.count - 1 {
                    text += cell
                } else {
                    text += cell + String(repeating: " ", count: widths[column] - cell.count + 2)
                }
            }
            while text.hasSuffix(" ") { text.removeLast() }
            return text
        }
        return ([line(header)] + rows.map(line)).joined(separator: "\n")
    }
}
